// The C ABI of communicators: making one (from the launch environment, from explicit options with
// dtrain's rendezvous store, or through the caller's own store with an extensible configuration,
// dtrain_comm_init_config), asking its rank and size, setting its deadline, aborting the call in flight, destroying it; the
// library's version and the text of statuses and of the last error. Every function body runs inside
// guard() (handle.hpp), the library's only conversion of exceptions into statuses.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/rendezvous/store/client.hpp"
#include "dtrain/rendezvous/store/etcd_plugin.hpp"
#include "callback_store.hpp"
#include "handle.hpp"
#include "hosts.hpp"
#include "scoped_store.hpp"

namespace dtrain::coll {
namespace {

// A caller's timeout_s: seconds (+inf: no practical deadline, kLongestDeadline) or <= 0 for the
// default; NaN and -inf are no duration and are refused naming `field`.
void check_timeout(double timeout_s, const char* field) {
  if (timeout_s != timeout_s || timeout_s == -HUGE_VAL)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("{} is {}: pass seconds (inf for no deadline), or <= 0 for the default", field,
                                timeout_s));
}

// `etcd`: the store is the etcd backend's (DTRAIN_STORE_ADDR etcd://...), not the TCP store at o.store_host.
dtrain_status_t init_common(const dtrain_init_options_t& o, dtrain_comm_t* out,
                            const std::optional<rdzv::EtcdSettings>& etcd = std::nullopt) {
  if (out == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "comm (the output pointer) is NULL");
  *out = nullptr;
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("rank {} / size {} is invalid", o.rank, o.size));
  if (!etcd && (o.store_host == nullptr || *o.store_host == '\0' || o.store_port <= 0 || o.store_port > 65535))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("the rendezvous store address is missing or bad (host '{}', port {})",
                                o.store_host ? o.store_host : "", o.store_port));
  CommConfig cfg;
  cfg.rank = o.rank;
  cfg.size = o.size;
  cfg.local_rank = o.local_size < 0 ? -1 : (o.local_rank < 0 ? o.rank : o.local_rank);
  cfg.local_size = o.local_size;
  cfg.run_id = o.run_id != nullptr && *o.run_id ? o.run_id : "default";
  cfg.generation = o.generation;
  cfg.transport = o.transport != nullptr && *o.transport ? o.transport : "";
  check_timeout(o.timeout_s, "options->timeout_s");
  apply_params(cfg, o.timeout_s);
  rdzv::ClientOptions co;
  co.host = o.store_host;
  co.port = o.store_port;
  co.token = o.token != nullptr ? o.token : "";
  co.run_id = cfg.run_id;
  co.generation = cfg.generation;
  co.connect_timeout = cfg.timeout;
  co.client_name = fmt::format("rank {}", cfg.rank);
  std::shared_ptr<rdzv::Store> store =
      etcd ? std::shared_ptr<rdzv::Store>(rdzv::open_etcd_store(*etcd, cfg.run_id, cfg.generation)) : rdzv::connect_store(co);
  auto c = std::make_unique<dtrain_comm>();
  c->cpu = std::make_unique<Communicator>(cfg, std::move(store));
  *out = c.release();
  return DTRAIN_SUCCESS;
}

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
  check_timeout(c.timeout_s, "config->timeout_s");
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

dtrain_status_t init_world_from_env(dtrain_comm_t* comm) {
  dtrain_init_options_t o;
  dtrain_init_options_default(&o);
  o.rank = env_int("RANK", true, 0);
  o.size = env_int("WORLD_SIZE", true, 1);
  o.local_rank = env_int("LOCAL_RANK", false, -1);
  o.local_size = env_int("LOCAL_WORLD_SIZE", false, -1);
  if (o.local_size < 0) o.local_rank = -1;
  std::string addr = env_or("DTRAIN_STORE_ADDR");
  if (addr.empty())
    throw ConfigError("DTRAIN_STORE_ADDR is not set: run the worker under `dtrain launch`, or set it to the "
                      "HOST:PORT of a dtrain rendezvous store, or use dtrain_comm_init()");
  std::string token = env_or("DTRAIN_STORE_TOKEN");
  std::string run = env_or("DTRAIN_RUN_ID", "TORCHELASTIC_RUN_ID");
  o.token = token.c_str();
  o.run_id = run.empty() ? nullptr : run.c_str();
  o.generation = env_int("DTRAIN_GENERATION", false, 0, "TORCHELASTIC_RESTART_COUNT");
  if (addr.rfind(rdzv::kEtcdScheme, 0) == 0) return init_common(o, comm, rdzv::etcd_settings_from_env(addr));
  const auto hp = dtrain::net::parse_host_port(addr, "DTRAIN_STORE_ADDR");
  o.store_host = hp.host.c_str();
  o.store_port = hp.port;
  return init_common(o, comm);
}

}  // namespace dtrain::coll

using namespace dtrain::coll;

extern "C" {

const char* dtrain_version(void) { return DTRAIN_VERSION; }

void dtrain_init_options_default(dtrain_init_options_t* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->rank = 0;
  o->size = 1;
  o->local_rank = -1;
  o->local_size = -1;
  o->store_host = "127.0.0.1";
  o->store_port = 0;
  o->token = nullptr;
  o->run_id = nullptr;
  o->generation = 0;
  o->timeout_s = 0;
  o->transport = nullptr;
}

dtrain_status_t dtrain_comm_init(const dtrain_init_options_t* options, dtrain_comm_t* comm) {
  return guard([&] {
    if (options == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "options is NULL");
    return init_common(*options, comm);
  });
}

dtrain_status_t dtrain_comm_init_from_env(dtrain_comm_t* comm) {
  return guard([&] { return init_world_from_env(comm); });
}

dtrain_status_t dtrain_comm_rank(dtrain_comm_t comm, int* rank) {
  return guard([&] {
    if (rank == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "rank (the output pointer) is NULL");
    *rank = cpu_of(comm).rank();
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_comm_size(dtrain_comm_t comm, int* size) {
  return guard([&] {
    if (size == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "size (the output pointer) is NULL");
    *size = cpu_of(comm).size();
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_comm_destroy(dtrain_comm_t comm) {
  return guard([&] {
    if (comm == nullptr) return DTRAIN_SUCCESS;
    std::unique_ptr<dtrain_comm> owned(comm);
    owned->nccl.reset();
    owned->nccl_store.reset();
    owned->cpu.reset();
    return DTRAIN_SUCCESS;
  });
}

const char* dtrain_status_string(dtrain_status_t status) {
  switch (status) {
    case DTRAIN_SUCCESS: return "success";
    case DTRAIN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case DTRAIN_ERR_CONFIG: return "configuration error";
    case DTRAIN_ERR_TIMEOUT: return "timeout";
    case DTRAIN_ERR_PEER: return "peer failure";
    case DTRAIN_ERR_MISMATCH: return "mismatched calls";
    case DTRAIN_ERR_UNSUPPORTED: return "unsupported";
    case DTRAIN_ERR_SYSTEM: return "system error";
    case DTRAIN_ERR_NCCL: return "NCCL error";
    case DTRAIN_ERR_CUDA: return "CUDA error";
    case DTRAIN_ERR_AUTH: return "authentication refused";
    case DTRAIN_ERR_ABORTED: return "communicator aborted";
    case DTRAIN_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* dtrain_last_error(void) { return last_error_cstr(); }

int dtrain_version_code(void) { return DTRAIN_VERSION_CODE; }

dtrain_status_t dtrain_comm_init_config(const dtrain_config_t* config, dtrain_comm_t* comm) {
  return guard([&] { return init_config(config, comm); });
}

dtrain_status_t dtrain_comm_set_timeout(dtrain_comm_t comm, double timeout_s) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    check_timeout(timeout_s, "set_timeout: timeout_s");
    c.set_timeout(timeout_s <= 0 ? std::chrono::milliseconds(0) : deadline_of(timeout_s));
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
