#pragma once
// What the config tests share: a machine of their own (no scheduler variables, no SageMaker file,
// host "testhost", 3 CPUs, no GPU), and the plan or identity of a spec on it, or why there is none.
#include <map>
#include <string>
#include <utility>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/launch.hpp"
#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"

namespace dtrain::config::test {

inline Environment env_of(std::map<std::string, std::string> vars = {}, std::string hostname = "testhost") {
  Environment e;
  e.vars = std::move(vars);
  e.sagemaker_resource_file = "/nonexistent/resourceconfig.json";
  e.hostname = std::move(hostname);
  e.cpu_slots = 3;
  e.visible_gpus = 0;
  return e;
}

inline JobSpec spec_of(const std::string& text = R"({"command": ["a"]})", const Overrides& o = {}) {
  return load_spec_text(text, o);
}

// The overrides of flags as the command line gives them: {{"--nnodes", "3"}, {"--standalone", ""}}.
inline Overrides flags(std::initializer_list<std::pair<const char*, const char*>> given) {
  Overrides o;
  for (const auto& [flag, value] : given) (void)set_flag(o, flag, value);
  return o;
}

inline Plan plan_of(const std::string& text, const Overrides& o = {}, const Environment& env = env_of()) {
  return make_plan(load_spec_text(text, o), o, env);
}

// The problems of a plan that must fail, as one text.
inline std::string failure(const std::string& text, const Overrides& o = {}, const Environment& env = env_of()) {
  try {
    (void)plan_of(text, o, env);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

// The problems of an identity that must fail, as one text.
inline std::string failure(const JobSpec& spec, const Overrides& o, const Environment& env) {
  try {
    (void)discover_identity(spec, o, env);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace dtrain::config::test
