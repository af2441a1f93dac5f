// The embedded demo job: what `dtrain launch` runs when no job file is given (the README demo).
// Its worker is dtrain-demo-worker (examples/dp_sgd: data-parallel SGD over the collectives
// library), found next to the running dtrain binary (the build tree) or in <prefix>/libexec/dtrain/
// (an install). This is the one place to point the demo at another worker program.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/spec.hpp"

namespace dtrain::config {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDemoWorker = "dtrain-demo-worker";

// Single node, standalone rendezvous, 2 CPU workers; 3 epochs of 64 iterations take well under a second.
constexpr const char* kDefaultJob = R"json({
  "version": 1,
  "name": "demo",
  "command": ["dtrain-demo-worker"],
  "cluster": { "instances": 1, "procs_per_instance": 2 },
  "batch": { "per_replica": 16, "micro_batches": 2, "dataset_size": 2048, "epochs": 3 },
  "restart": { "max_restarts": 0 },
  "output": { "tag": true },
  "max_runtime_s": 120
})json";

fs::path self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    throw ConfigError(fmt::format("the built-in demo job: cannot find the dtrain binary (readlink /proc/self/exe: {}); "
                                  "pass a job file: dtrain launch JOB.json",
                                  std::strerror(errno)));
  return fs::path(std::string(buf, static_cast<std::size_t>(n)));
}

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

fs::path find_worker(const fs::path& dtrain_exe) {
  const fs::path dir = dtrain_exe.parent_path();
  const fs::path next_to = dir / kDemoWorker;
  const fs::path libexec = dir / ".." / "libexec" / "dtrain" / kDemoWorker;
  if (executable(next_to)) return next_to;
  if (executable(libexec)) return libexec.lexically_normal();
  throw ConfigError(fmt::format(
      "the built-in demo job needs its worker program {}, which is neither next to {} ({}) nor in {}; build it "
      "(cmake --build BUILD_DIR --target {}, or build everything) or install dtrain, or pass a job file: dtrain "
      "launch JOB.json",
      kDemoWorker, dtrain_exe.string(), next_to.string(), libexec.lexically_normal().string(), kDemoWorker));
}

}  // namespace

JobSpec default_spec(const Overrides& overrides, const std::filesystem::path& dtrain_exe) {
  JobSpec spec = load_spec_text(kDefaultJob, overrides, "(built-in demo job)");
  if (!spec.command.empty() && spec.command.front() == kDemoWorker) spec.command.front() = find_worker(dtrain_exe).string();
  return spec;
}

JobSpec default_spec(const Overrides& overrides) { return default_spec(overrides, self_exe()); }

}  // namespace dtrain::config
