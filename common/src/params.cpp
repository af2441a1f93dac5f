#include "dtrain/common/params.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "dtrain/common/errors.hpp"

namespace dtrain {
namespace {

// Keep sorted by name. Every entry must appear in the man pages (tests/docs checks it).
constexpr Param kParams[] = {
    {"DTRAIN_COLL_SPIN_US", "50", "microseconds a waiting rank first spins before it sleeps (futex, poll); in shared memory grows up to 20x while peers arrive within it"},
    {"DTRAIN_COLL_TIMEOUT_S", "300", "deadline of one collective call, in seconds"},
    {"DTRAIN_CUDA_DEVICE", "", "CUDA device of the NCCL communicator (default: the current one if set, else LOCAL_RANK mod visible devices)"},
    {"DTRAIN_ETCD_PLUGIN", "", "path of libdtrain_etcd.so, the etcd rendezvous backend (default: next to the dtrain binary or library, then the loader's path)"},
    {"DTRAIN_LOG", "warn", "log level and subsystems: error|warn|info|debug|trace[:cli,config,rdzv,agent,coll,net]"},
    {"DTRAIN_RDZV_TOKEN", "", "rendezvous token itself (prefer rendezvous.token_file or --token-file)"},
    {"DTRAIN_SHM_P2P_BYTES", "2097152", "bytes of one rank's point-to-point receive rings in shared memory, split over its local peers (each ring 16 KiB .. 1 MiB)"},
    {"DTRAIN_SHM_SLOT_BYTES", "2097152", "bytes of one rank's shared-memory slot (the pipelining chunk of the shm engine)"},
    {"DTRAIN_SOCKET_ADDR", "", "address a worker advertises for the TCP engine (default: the one that reaches the store)"},
    {"DTRAIN_TCP_CHUNK_BYTES", "1048576", "bytes per message of the TCP engine's ring and chain pipelines"},
    {"DTRAIN_TEST_GPUS", "", "GPU count dtrain assumes for gpus_per_instance \"auto\" instead of counting /dev/nvidia* (tests)"},
    {"DTRAIN_TRANSPORT", "auto", "CPU engine between ranks of one node: auto (shared memory) or tcp"},
};

}  // namespace

std::span<const Param> params() { return kParams; }

const Param* find_param(std::string_view name) {
  for (const auto& p : kParams)
    if (name == p.name) return &p;
  return nullptr;
}

std::string param_string(std::string_view name) {
  const Param* p = find_param(name);
  DTRAIN_CHECK(p != nullptr, "unregistered parameter {}", name);
  if (const char* v = std::getenv(p->name); v != nullptr && *v != '\0') return v;
  return p->default_value;
}

std::int64_t param_int(std::string_view name) {
  std::string v = param_string(name);
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != '\0')
    throw ConfigError(fmt::format("{}={}: expected an integer", name, v));
  return x;
}

double param_double(std::string_view name) {
  std::string v = param_string(name);
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v.c_str(), &end);
  const bool overflow = errno == ERANGE && std::isinf(x);  // "1e400": as large as "inf", which is taken too
  if (v.empty() || (errno != 0 && !overflow) || *end != '\0')
    throw ConfigError(fmt::format("{}={}: expected a number", name, v));
  return x;
}

}  // namespace dtrain
