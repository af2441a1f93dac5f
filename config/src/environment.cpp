// The snapshot of this machine the planner works from (Environment, plan.hpp): the environment
// variables, the host name, and the hardware facts the plan needs (visible GPUs, usable CPUs),
// probed once here so that make_plan() itself reads nothing from the machine.
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/plan.hpp"

extern char** environ;

namespace dtrain::config {
namespace {

bool is_index(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

int count_visible_gpus(const Environment& env) {
  if (const std::string* t = env.get("DTRAIN_TEST_GPUS"); t != nullptr && !t->empty()) {
    int n = -1;
    auto [p, ec] = std::from_chars(t->data(), t->data() + t->size(), n);
    if (ec != std::errc{} || p != t->data() + t->size() || n < 0 || n > 4096)
      throw ConfigError(fmt::format("DTRAIN_TEST_GPUS={}: expected a GPU count from 0 to 4096", *t));
    return n;
  }
  int devices = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(env.dev_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && is_index(std::string_view(name).substr(6))) ++devices;
  }
  if (devices == 0) return 0;
  const std::string* cvd = env.get("CUDA_VISIBLE_DEVICES");
  if (cvd == nullptr) return devices;
  // As CUDA reads it: entries up to the first invalid one count.
  int visible = 0;
  for (const auto& entry : text::split(*cvd, ',')) {
    std::string_view e = entry;
    while (!e.empty() && e.front() == ' ') e.remove_prefix(1);
    if (e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0) {
      ++visible;
      continue;
    }
    int idx = -1;
    auto [p, ec2] = std::from_chars(e.data(), e.data() + e.size(), idx);
    if (e.empty() || ec2 != std::errc{} || p != e.data() + e.size() || idx < 0 || idx >= devices) break;
    ++visible;
  }
  return visible;
}


Environment Environment::current() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.vars.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) env.hostname = name;
  env.visible_gpus = count_visible_gpus(env);
  env.cpu_slots = sys::usable_cpus();
  return env;
}

const std::string* Environment::get(const std::string& name) const {
  auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

}  // namespace dtrain::config
