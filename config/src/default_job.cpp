// The embedded demo job: what `dtrain launch` runs when no job file is given (the README demo).
// This is the one place to point it at another worker program.
#include "dtrain/config/spec.hpp"

namespace dtrain::config {
namespace {

constexpr const char* kDefaultJob = R"json({
  "version": 1,
  "name": "demo",
  "command": ["sh", "-c", "echo rank $RANK of $WORLD_SIZE on node $GROUP_RANK: global batch $DTRAIN_GLOBAL_BATCH"],
  "cluster": { "instances": 1, "procs_per_instance": 2 },
  "batch": { "per_replica": 8, "micro_batches": 2, "dataset_size": 64, "epochs": 1 },
  "restart": { "max_restarts": 0 },
  "output": { "tag": true }
})json";

}  // namespace

JobSpec default_spec(const Overrides& overrides) { return load_spec_text(kDefaultJob, overrides, "(built-in demo job)"); }

}  // namespace dtrain::config
