#include "callback_store.hpp"

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"

namespace dtrain::coll {
namespace {

// The callbacks' error(error_ctx, message) and value(value_ctx, bytes, len) sinks.
void on_error(void* ctx, const char* message) {
  auto* s = static_cast<std::string*>(ctx);
  if (message == nullptr) return;
  if (!s->empty()) *s += "; ";
  *s += message;
}

struct ValueSink {
  rdzv::Bytes bytes;
  bool got = false;
};
void on_value(void* ctx, const void* bytes, size_t len) {
  auto* v = static_cast<ValueSink*>(ctx);
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  v->bytes.assign(p, p + (p == nullptr ? 0 : len));
  v->got = true;
}

std::string key_text(std::string_view key) { return std::string(key); }

}  // namespace

CallbackStore::CallbackStore(const dtrain_store_t& s, std::string name) : s_(s), name_(std::move(name)) {}

void CallbackStore::check_rc(int rc, const char* call, std::string_view key, const std::string& reported) const {
  if (rc == DTRAIN_STORE_OK) return;
  const std::string where = name_.empty() ? std::string("the caller's store") : fmt::format("the store of {}", name_);
  const std::string detail = reported.empty() ? std::string("no message given") : reported;
  if (rc == DTRAIN_STORE_TIMEOUT)
    throw TimeoutError(fmt::format("{}: {}(\"{}\") timed out: {}", where, call, key, detail));
  if (rc == DTRAIN_STORE_ERROR) throw IoError(fmt::format("{}: {}(\"{}\") failed: {}", where, call, key, detail));
  throw IoError(fmt::format("{}: {}(\"{}\") returned {}, which is not a DTRAIN_STORE_* result ({})", where, call, key,
                            rc, detail));
}

void CallbackStore::set(std::string_view key, rdzv::ByteView value) {
  std::string err, k = key_text(key);
  const int rc = s_.set(s_.ctx, k.c_str(), value.data(), value.size(), on_error, &err);
  check_rc(rc, "set", key, err);
}

rdzv::Bytes CallbackStore::get(std::string_view key, rdzv::milliseconds timeout) {
  std::string err, k = key_text(key);
  ValueSink v;
  const int rc = s_.get(s_.ctx, k.c_str(), static_cast<long long>(timeout.count()), on_value, &v, on_error, &err);
  if (rc == DTRAIN_STORE_TIMEOUT && err.empty()) err = fmt::format("key not set within {} ms", timeout.count());
  check_rc(rc, "get", key, err);
  if (!v.got) throw IoError(fmt::format("the caller's store: get(\"{}\") returned OK without a value", key));
  return std::move(v.bytes);
}

std::int64_t CallbackStore::add(std::string_view key, std::int64_t delta) {
  std::string err, k = key_text(key);
  long long result = 0;
  const int rc = s_.add(s_.ctx, k.c_str(), static_cast<long long>(delta), &result, on_error, &err);
  check_rc(rc, "add", key, err);
  return static_cast<std::int64_t>(result);
}

rdzv::Bytes CallbackStore::compare_set(std::string_view key, rdzv::ByteView expected, rdzv::ByteView desired) {
  std::string err, k = key_text(key);
  ValueSink v;
  const int rc = s_.compare_set(s_.ctx, k.c_str(), expected.data(), expected.size(), desired.data(), desired.size(),
                                on_value, &v, on_error, &err);
  check_rc(rc, "compare_set", key, err);
  return std::move(v.bytes);
}

bool CallbackStore::check(std::span<const std::string> keys) {
  for (const auto& k : keys) {
    std::string err;
    int exists = 0;
    const int rc = s_.check(s_.ctx, k.c_str(), &exists, on_error, &err);
    check_rc(rc, "check", k, err);
    if (exists == 0) return false;
  }
  return true;
}

bool CallbackStore::erase(std::string_view key) {
  throw InternalError(fmt::format("the caller's store has no erase callback (dtrain_store_t), so \"{}\" cannot be "
                                  "removed; the collectives never erase keys",
                                  key));
}

// Every caller adds itself to <name>/arrived; the one that completes the count publishes <name>/done,
// which every caller waits for.
void CallbackStore::barrier(std::string_view name, int count, rdzv::milliseconds timeout) {
  const std::string base(name);
  const std::int64_t arrived = add(base + "/arrived", 1);
  if (arrived == count) set(base + "/done", rdzv::as_bytes("1"));
  try {
    get(base + "/done", timeout);
  } catch (const TimeoutError&) {
    throw TimeoutError(fmt::format("store barrier \"{}\": {} of {} arrived within {} ms", name,
                                   add(base + "/arrived", 0), count, timeout.count()));
  }
}

}  // namespace dtrain::coll
