// libFuzzer target: the job spec parser and validation, then the plan built from it (batch math,
// rank table, layout) and its JSON and text forms, as `dtrain plan` does. A spec error is the
// expected way out; any other exception, crash, leak or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"

using namespace dtrain::config;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 1 << 16) return -1;
  std::string text(reinterpret_cast<const char*>(data), size);
  Environment env;  // a fixed machine: no scheduler variables, 4 CPUs, no GPUs
  env.cpu_slots = 4;
  env.visible_gpus = 0;
  env.hostname = "fuzzhost";
  env.sagemaker_resource_file = "/nonexistent";
  try {
    JobSpec spec = load_spec_text(text, {}, "fuzz.json");
    Plan plan = make_plan(spec, {}, env);
    (void)plan_to_json(plan);
    (void)plan_to_text(plan);
  } catch (const dtrain::ConfigError&) {  // SpecError and the identity errors: a refused spec
  }
  return 0;
}
