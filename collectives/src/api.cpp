// The exported C ABI: initialisation and the collectives (api_groups.cpp: split and groups from the
// environment; api_p2p.cpp: point-to-point). Every function body runs inside guard()
// (handle.hpp), which turns any exception into a status code plus the thread-local last error,
// so nothing C++ crosses the boundary; it is the library's only such conversion (the CPU engines and
// the NCCL backend throw CollError carrying the status). Host buffers go to the CPU communicator;
// device buffers (nccl::is_device_pointer) to a lazily created NCCL communicator.
//
// In place (both engines, the same forms): allreduce and broadcast take send == recv; allgather takes
// send == recv + rank*sendcount (NCCL's layout) or send == recv (this rank's contribution is the first
// sendcount elements of recv); reduce_scatter takes recv == send + rank*recvcount (NCCL's layout) or
// recv == send (the result lands in the first recvcount elements). Host calls are normalised here
// (the extension forms become NCCL's layout) so the CPU engine sees out-of-place or NCCL-layout calls
// only; any other overlap of the two buffers is DTRAIN_ERR_INVALID_ARGUMENT on both engines.
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
#include "handle.hpp"
#include "in_place.hpp"

namespace dtrain::coll {
namespace {

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

dtrain_status_t dtrain_allreduce(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 dtrain_dtype_t dtype, dtrain_op_t op, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    check_same_or_apart("allreduce", sendbuf, recvbuf, count, dtype);
    if (on_device(sendbuf, recvbuf)) {
      nccl::Comm& n = nccl_of(comm, sendbuf, recvbuf);
      return on_nccl(comm, [&] { n.allreduce(sendbuf, recvbuf, count, dtype, op, stream, c.premul_scale(op)); });
    }
    c.allreduce(sendbuf, recvbuf, count, dtype, op);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_broadcast(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 dtrain_dtype_t dtype, int root, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    if (on_device(sendbuf, recvbuf)) {
      nccl::Comm& n = nccl_of(comm, sendbuf, recvbuf);
      return on_nccl(comm, [&] { n.broadcast(sendbuf, recvbuf, count, dtype, root, stream); });
    }
    c.broadcast(sendbuf, recvbuf, count, dtype, root);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_allgather(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                 dtrain_dtype_t dtype, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    const bool same = allgather_alias(sendbuf, recvbuf, sendcount, dtype, c.rank(), c.size());
    if (on_device(sendbuf, recvbuf)) {
      nccl::Comm& n = nccl_of(comm, sendbuf, recvbuf);
      return on_nccl(comm, [&] { n.allgather(sendbuf, recvbuf, sendcount, dtype, stream); });
    }
    if (same && c.rank() != 0) {
      // send == recv: move this rank's contribution to its own block, then NCCL's in-place layout.
      const std::size_t bytes = sendcount * dtype_size(dtype);
      auto* own = static_cast<std::uint8_t*>(recvbuf) + bytes * static_cast<std::size_t>(c.rank());
      std::memcpy(own, recvbuf, bytes);  // disjoint: own starts at rank*bytes >= bytes
      c.allgather(own, recvbuf, sendcount, dtype);
      return DTRAIN_SUCCESS;
    }
    c.allgather(sendbuf, recvbuf, sendcount, dtype);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_reduce_scatter(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                      dtrain_dtype_t dtype, dtrain_op_t op, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    const bool same = reduce_scatter_alias(sendbuf, recvbuf, recvcount, dtype, c.rank(), c.size());
    if (on_device(sendbuf, recvbuf)) {
      nccl::Comm& n = nccl_of(comm, sendbuf, recvbuf);
      return on_nccl(comm, [&] { n.reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, stream, c.premul_scale(op)); });
    }
    if (same && c.rank() != 0) {
      // recv == send: NCCL's in-place layout, then the result moves to the first recvcount elements.
      const std::size_t bytes = recvcount * dtype_size(dtype);
      auto* own = static_cast<std::uint8_t*>(recvbuf) + bytes * static_cast<std::size_t>(c.rank());
      c.reduce_scatter(sendbuf, own, recvcount, dtype, op);
      std::memcpy(recvbuf, own, bytes);  // disjoint: own starts at rank*bytes >= bytes
      return DTRAIN_SUCCESS;
    }
    c.reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_barrier(dtrain_comm_t comm) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    if (comm->nccl) return on_nccl(comm, [&] { comm->nccl->barrier(); });
    c.barrier();
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

}  // extern "C"
