// The NCCL backend's bootstrap: the unique id travels through the rendezvous store, and so does a
// failure, so that no rank waits for an id that will never come (see nccl_core.hpp).
#include <algorithm>
#include <cstring>

#include "dtrain/common/log.hpp"
#include "nccl_core.hpp"

namespace dtrain::coll::nccl {
namespace {

using std::chrono::milliseconds;

constexpr char kFailureMark[] = "!nccl-failed:";

std::string key_prefix(int instance) { return instance == 0 ? "nccl" : fmt::format("nccl/{}", instance); }

[[noreturn]] void rethrow_store_error(std::string_view what) {
  try {
    throw;
  } catch (const TimeoutError& e) {
    throw Error(DTRAIN_ERR_TIMEOUT, fmt::format("{}: {}", what, e.what()));
  } catch (const AuthError& e) {
    throw Error(DTRAIN_ERR_AUTH, fmt::format("{}: {}", what, e.what()));
  } catch (const IoError& e) {
    throw Error(DTRAIN_ERR_PEER, fmt::format("{}: {}", what, e.what()));
  }
}

}  // namespace

// ---- bootstrap ----

std::string id_key(int instance) { return key_prefix(instance) + "/id"; }
std::string failed_key(int instance) { return key_prefix(instance) + "/failed"; }

rdzv::Bytes new_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  const auto* p = reinterpret_cast<const std::uint8_t*>(&id);
  return rdzv::Bytes(p, p + sizeof id);
}

rdzv::Bytes exchange_unique_id(rdzv::Store& store, int rank, int instance, Clock::time_point deadline,
                               const std::function<rdzv::Bytes()>& make_id) {
  const std::string key = id_key(instance);
  if (rank == 0) {
    rdzv::Bytes id = make_id();
    DTRAIN_CHECK(id.size() == kUniqueIdBytes, "unique id of {} bytes", id.size());
    try {
      store.set(key, id);
    } catch (const dtrain::Error&) {
      rethrow_store_error(fmt::format("rank 0: publishing the NCCL unique id under store key '{}'", key));
    }
    DTRAIN_DEBUG(coll, "rank 0 published the NCCL unique id under '{}'", key);
    return id;
  }
  auto left = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  rdzv::Bytes value;
  try {
    value = store.get(key, left);
  } catch (const TimeoutError&) {
    throw Error(DTRAIN_ERR_TIMEOUT,
                fmt::format("rank {}: no NCCL unique id from rank 0 under store key '{}' after {:.1f} s; "
                            "rank 0 has not reached its first device collective (is it running? did it "
                            "fail?)",
                            rank, key, seconds(left)));
  } catch (const dtrain::Error&) {
    rethrow_store_error(fmt::format("rank {}: waiting for the NCCL unique id under store key '{}'", rank, key));
  }
  const std::size_t mark = sizeof kFailureMark - 1;
  if (value.size() != kUniqueIdBytes && value.size() >= mark &&
      std::memcmp(value.data(), kFailureMark, mark) == 0)
    throw Error(DTRAIN_ERR_PEER,
                fmt::format("rank {}: rank 0 could not set up NCCL: {}", rank,
                            rdzv::to_string(rdzv::ByteView(value).subspan(mark))));
  if (value.size() != kUniqueIdBytes)  // a peer's doing, or another program's: not this library's
    throw Error(DTRAIN_ERR_PEER,
                fmt::format("rank {}: store key '{}' holds {} bytes, not a {}-byte NCCL unique id (does "
                            "another program write this key?)",
                            rank, key, value.size(), kUniqueIdBytes));
  return value;
}

void publish_failure(rdzv::Store* store, int rank, int instance, const std::string& message) noexcept {
  if (store == nullptr) return;
  try {
    std::string text = fmt::format("rank {}: {}", rank, message);
    store->compare_set(failed_key(instance), {}, rdzv::as_bytes(text));
    if (rank == 0) {
      std::string marked = kFailureMark + message;
      if (marked.size() == kUniqueIdBytes) marked += ' ';
      store->compare_set(id_key(instance), {}, rdzv::as_bytes(marked));  // only if no id was published
    }
  } catch (const std::exception& e) {
    DTRAIN_DEBUG(coll, "could not publish the NCCL failure of rank {}: {}", rank, e.what());
  }
}

std::string published_failure(rdzv::Store& store, int instance) {
  const std::string key = failed_key(instance);
  const std::string keys[] = {key};
  if (!store.check(keys)) return {};
  return rdzv::to_string(store.get(key, milliseconds(5000)));
}

std::string hex(rdzv::ByteView bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace dtrain::coll::nccl
