// The C ABI of version 0.3's init: dtrain_comm_init_config (a communicator bootstrapped through the
// caller's key-value store callbacks, with an extensible configuration read up to its struct_size),
// dtrain_comm_set_timeout, dtrain_comm_abort and dtrain_version_code.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "handle.hpp"
#include "callback_store.hpp"
#include "scoped_store.hpp"

namespace dtrain::coll {
namespace {

// The bytes of dtrain_config_t a caller must provide: everything up to and including `store`.
constexpr std::size_t kRequiredBytes = offsetof(dtrain_config_t, store) + sizeof(dtrain_config_t::store);

dtrain_config_t read_config(const dtrain_config_t* in) {
  if (in == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "config is NULL; pass a dtrain_config_t");
  std::size_t size = 0;
  std::memcpy(&size, in, sizeof size);  // struct_size first, before anything else is trusted
  if (size < kRequiredBytes)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("config->struct_size is {}, less than the {} bytes up to config->store; start from "
                                "DTRAIN_CONFIG_INITIALIZER (which sets struct_size) and then set the fields",
                                size, kRequiredBytes));
  dtrain_config_t c;
  std::memset(&c, 0, sizeof c);
  std::memcpy(&c, in, std::min(size, sizeof c));  // fields past the caller's size stay 0: their defaults
  return c;
}

void check_config(const dtrain_config_t& c) {
  auto bad = [](const std::string& m) { throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, m); };
  if (c.size < 1) bad(fmt::format("config->size is {}: set it to the number of ranks (>= 1)", c.size));
  if (c.rank < 0 || c.rank >= c.size)
    bad(fmt::format("config->rank is {}: it must be in 0 .. size-1 = {}", c.rank, c.size - 1));
  if (c.store == nullptr) bad("config->store is NULL: pass the dtrain_store_t the ranks bootstrap through");
  const dtrain_store_t& s = *c.store;
  const char* missing = s.set == nullptr           ? "set"
                        : s.get == nullptr         ? "get"
                        : s.add == nullptr         ? "add"
                        : s.compare_set == nullptr ? "compare_set"
                        : s.check == nullptr       ? "check"
                                                   : nullptr;
  if (missing != nullptr)
    bad(fmt::format("config->store->{} is NULL: every callback of dtrain_store_t is required", missing));
  if (c.transport != nullptr && *c.transport != '\0') {
    const std::string t = c.transport;
    if (t != "auto" && t != "tcp" && t != "shm")
      bad(fmt::format("config->transport is \"{}\": expected NULL, \"auto\" or \"tcp\"", t));
  }
  if (c.host != nullptr && *c.host == '\0') bad("config->host is empty: pass NULL for this host's own identity");
}

dtrain_status_t init_config(const dtrain_config_t* config, dtrain_comm_t* out) {
  if (out == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "comm (the output pointer) is NULL");
  *out = nullptr;
  const dtrain_config_t c = read_config(config);
  check_config(c);
  CommConfig cfg;
  cfg.rank = c.rank;
  cfg.size = c.size;
  cfg.run_id = c.name != nullptr && *c.name ? c.name : "store";
  cfg.transport = c.transport != nullptr && *c.transport ? c.transport : "";
  cfg.advertise = c.advertise != nullptr ? c.advertise : "";
  apply_params(cfg, c.timeout_s);
  auto store = std::make_shared<CallbackStore>(*c.store, c.name != nullptr ? c.name : "");
  const std::string host = c.host != nullptr ? std::string(c.host) : default_host_identity();
  auto h = std::make_unique<dtrain_comm>();
  h->cpu = Communicator::with_hosts(cfg, std::move(store), host);
  h->nccl_store = std::make_unique<ScopedStore>(*h->cpu->store(), h->cpu->key_prefix());
  *out = h.release();
  return DTRAIN_SUCCESS;
}

}  // namespace
}  // namespace dtrain::coll

using namespace dtrain::coll;

extern "C" {

int dtrain_version_code(void) { return DTRAIN_VERSION_CODE; }

dtrain_status_t dtrain_comm_init_config(const dtrain_config_t* config, dtrain_comm_t* comm) {
  return guard([&] { return init_config(config, comm); });
}

dtrain_status_t dtrain_comm_set_timeout(dtrain_comm_t comm, double timeout_s) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    if (timeout_s != timeout_s)
      throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "set_timeout: timeout_s is NaN; pass seconds, or <= 0 to restore");
    const double ms = timeout_s * 1000.0;
    c.set_timeout(std::chrono::milliseconds(ms <= 0 ? 0 : ms > 1e15 ? static_cast<long long>(1e15)
                                                                    : std::max(1LL, static_cast<long long>(ms))));
    if (comm->nccl) comm->nccl->set_timeout(c.timeout());  // a later NCCL communicator starts with it
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_comm_abort(dtrain_comm_t comm, const char* reason) {
  return guard([&] {
    cpu_of(comm).abort(reason != nullptr && *reason != '\0' ? reason : "aborted");
    return DTRAIN_SUCCESS;
  });
}

}  // extern "C"
