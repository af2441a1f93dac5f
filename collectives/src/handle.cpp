#include "handle.hpp"

#include <cstdlib>
#include <new>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/params.hpp"
#include "nccl/driver_probe.hpp"

namespace dtrain::coll {

std::pair<dtrain_status_t, std::string> current_failure() {
  try {
    throw;
  } catch (const CollError& e) {
    return {e.status(), e.what()};
  } catch (const AuthError& e) {
    return {DTRAIN_ERR_AUTH, e.what()};
  } catch (const TimeoutError& e) {
    return {DTRAIN_ERR_TIMEOUT, e.what()};
  } catch (const ConfigError& e) {
    return {DTRAIN_ERR_CONFIG, e.what()};
  } catch (const IoError& e) {
    return {DTRAIN_ERR_PEER, e.what()};
  } catch (const InternalError& e) {
    return {DTRAIN_ERR_INTERNAL, e.what()};
  } catch (const std::bad_alloc&) {
    return {DTRAIN_ERR_SYSTEM, "out of memory"};
  } catch (const std::exception& e) {
    return {DTRAIN_ERR_INTERNAL, e.what()};
  } catch (...) {
    return {DTRAIN_ERR_INTERNAL, "unknown exception"};
  }
}

Communicator& cpu_of(dtrain_comm_t comm) {
  if (comm == nullptr || !comm->cpu) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "the communicator is NULL");
  return *comm->cpu;
}

// One look for the CUDA driver per call (not one per buffer): without it no buffer is on a device.
bool on_device(const void* a, const void* b) {
  return nccl::cuda_driver_loaded() && (nccl::is_device_pointer(a) || nccl::is_device_pointer(b));
}

void remember_nccl_failure(dtrain_comm_t comm, dtrain_status_t status, std::string message) {
  if (comm->nccl_failed) return;
  comm->nccl_failed = true;
  comm->nccl_status = status;
  comm->nccl_error = std::move(message);
}

nccl::Comm& nccl_of(dtrain_comm_t comm, const void* sendbuf, const void* recvbuf) {
  Communicator& c = cpu_of(comm);
  if (comm->nccl_failed) {
    if (!comm->nccl) throw CollError(comm->nccl_status, comm->nccl_error);
    throw CollError(DTRAIN_ERR_ABORTED,
                    fmt::format("the NCCL communicator failed earlier; destroy the communicator (first error: {})",
                                comm->nccl_error));
  }
  if (!comm->nccl) {
    nccl::Options o;
    o.rank = c.rank();
    o.size = c.size();
    o.local_rank = c.local_rank();
    // The device the buffers live on, unless the user chose one with DTRAIN_CUDA_DEVICE (then a
    // buffer elsewhere is refused with both devices named).
    if (param_string("DTRAIN_CUDA_DEVICE").empty()) {
      o.device = nccl::device_of(recvbuf);
      if (o.device < 0) o.device = nccl::device_of(sendbuf);
    }
    o.store = comm->nccl_store ? comm->nccl_store.get() : c.store();
    o.timeout = c.timeout();
    try {
      comm->nccl = nccl::create(o);
    } catch (const std::bad_alloc&) {
      remember_nccl_failure(comm, DTRAIN_ERR_SYSTEM, "out of memory while creating the NCCL communicator");
      throw;
    } catch (...) {  // nccl::Error, "built without NCCL" included
      auto [status, message] = current_failure();
      remember_nccl_failure(comm, status, std::move(message));
      throw;
    }
  }
  return *comm->nccl;
}

std::string env_or(const char* name, const char* fallback_name) {
  if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return v;
  if (fallback_name != nullptr)
    if (const char* v = std::getenv(fallback_name); v != nullptr && *v != '\0') return v;
  return {};
}

int env_int(const char* name, bool required, int dflt, const char* fallback_name) {
  std::string v = env_or(name, fallback_name);
  if (v.empty()) {
    if (required)
      throw ConfigError(fmt::format("{} is not set: run the worker under `dtrain launch` (which sets RANK, "
                                    "WORLD_SIZE, DTRAIN_STORE_ADDR, ...) or use dtrain_comm_init()",
                                    name));
    return dflt;
  }
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || x < -1 || x > 1 << 30) throw ConfigError(fmt::format("{}={}: expected an integer", name, v));
  return static_cast<int>(x);
}

}  // namespace dtrain::coll
