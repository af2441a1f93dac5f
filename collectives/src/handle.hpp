#pragma once
// The communicator handle behind the C ABI (struct dtrain_comm) and what the api_*.cpp files share
// with it: guard(), the one place where exceptions become statuses; dispatch(), the one place where
// a call goes to the CPU communicator or to the NCCL communicator (created on first use for device
// buffers, with the memory of its failure); the launch environment's variables.
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "comm.hpp"
#include "dtrain/collectives.h"
#include "nccl/nccl_backend.hpp"
#include "status.hpp"

struct dtrain_comm {
  std::unique_ptr<dtrain::coll::Communicator> cpu;
  // The store the NCCL communicator bootstraps through: the CPU communicator's for the world, a
  // view scoped to the group's keys for a split (so its "nccl/id" is the group's own).
  std::unique_ptr<dtrain::rdzv::Store> nccl_store;
  std::unique_ptr<dtrain::coll::nccl::Comm> nccl;
  // Set once the NCCL communicator could not be created (nccl == nullptr) or one of its calls failed:
  // later device calls return nccl_status with nccl_error at once instead of running setup again.
  bool nccl_failed = false;
  dtrain_status_t nccl_status = DTRAIN_SUCCESS;
  std::string nccl_error;
  // A group from the environment keeps the process's shared world communicator alive.
  std::shared_ptr<dtrain_comm> world;
};

namespace dtrain::coll {

// The status and message the C ABI reports for the exception being handled (call inside a catch).
std::pair<dtrain_status_t, std::string> current_failure();

// Every exported function's body: the one place where exceptions become statuses.
template <class F>
dtrain_status_t guard(F&& body) noexcept {
  try {
    clear_last_error();
    return body();
  } catch (...) {
    auto [status, message] = current_failure();
    return fail(status, std::move(message));
  }
}

Communicator& cpu_of(dtrain_comm_t comm);
bool on_device(const void* a, const void* b);
// The NCCL communicator for device buffers, created on first use from the same store. A failed
// creation is remembered: the later calls fail at once with the same status and message.
nccl::Comm& nccl_of(dtrain_comm_t comm, const void* sendbuf, const void* recvbuf);
// Remembers the first failure of the NCCL communicator (or of its creation).
void remember_nccl_failure(dtrain_comm_t comm, dtrain_status_t status, std::string message);

// The buffers that decide where a call runs (null: one this rank does not use).
struct Buffers {
  const void* send = nullptr;
  const void* recv = nullptr;
  bool none = false;  // a call without buffers (the barrier)
};

// The C ABI's one dispatch between the engines. A call whose buffers include device memory (a call
// without buffers: when the communicator already has an NCCL communicator) runs device(nccl, cpu)
// on the NCCL communicator, created on first use; any other runs host(cpu) on the CPU
// communicator. A device call's failure other than a bad argument is remembered: the NCCL
// communicator is unusable from then on.
template <class Host, class Device>
dtrain_status_t dispatch(dtrain_comm_t comm, const Buffers& b, Host&& host, Device&& device) {
  Communicator& cpu = cpu_of(comm);
  const bool on_nccl = b.none ? comm->nccl != nullptr : on_device(b.send, b.recv);
  if (!on_nccl) {
    host(cpu);
    return DTRAIN_SUCCESS;
  }
  nccl::Comm& n = b.none ? *comm->nccl : nccl_of(comm, b.send, b.recv);
  try {
    device(n, cpu);
    return DTRAIN_SUCCESS;
  } catch (const std::bad_alloc&) {
    remember_nccl_failure(comm, DTRAIN_ERR_SYSTEM, "NCCL backend: out of host memory");
    throw CollError(DTRAIN_ERR_SYSTEM, "NCCL backend: out of host memory");
  } catch (...) {
    auto [status, message] = current_failure();
    if (status != DTRAIN_ERR_INVALID_ARGUMENT) remember_nccl_failure(comm, status, std::move(message));
    throw;
  }
}

// The environment `dtrain launch` sets: a variable's value ("" when unset or empty, then the
// fallback's), and an integer (ConfigError naming it when required and missing, or malformed).
std::string env_or(const char* name, const char* fallback_name = nullptr);
int env_int(const char* name, bool required, int dflt, const char* fallback_name = nullptr);

// dtrain_comm_init_from_env's body (the world from RANK, WORLD_SIZE, DTRAIN_STORE_ADDR, ...).
dtrain_status_t init_world_from_env(dtrain_comm_t* out);

}  // namespace dtrain::coll
