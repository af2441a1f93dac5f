// The launch settings a flag may set besides spec fields (launch_internal.hpp), each with its rule
// and where its checked value lands.
#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/hosts.hpp"
#include "launch_internal.hpp"

namespace dtrain::config::detail {
namespace {

using json = nlohmann::json;
using Problems = std::vector<SpecProblem>;
constexpr auto kInt = FieldType::integer;
constexpr auto kNum = FieldType::number;
constexpr auto kBool = FieldType::boolean;
constexpr auto kStr = FieldType::string;

const std::string& str(const json& v) { return v.get_ref<const std::string&>(); }

// --nproc-per-node: a count from 1 to 4096, or gpu, cpu, auto (counted by the plan).
void check_nproc(const json& v, const std::string& path, Problems& out) {
  const std::string& s = str(v);
  if (s == "gpu" || s == "cpu" || s == "auto") return;
  if (s == "xpu") {  // torch 2.x's Intel GPUs
    out.push_back({path, "xpu: dtrain runs CUDA GPU or CPU workers; give a count, gpu, cpu or auto"});
    return;
  }
  std::size_t pos = 0;
  long n = 0;
  try {
    n = std::stol(s, &pos);
  } catch (const std::logic_error&) {
    pos = 0;
  }
  if (pos == 0 || pos != s.size())
    out.push_back({path, fmt::format("'{}' is not a worker count; expected a number, gpu, cpu or auto", s)});
  else if (n < 1 || n > 4096)
    out.push_back({path, fmt::format("{} is out of range; expected a worker count from 1 to 4096", n)});
}

void apply_nproc(LaunchState& st, const json& v) {
  const std::string& s = str(v);
  st.ov.nproc_mode.reset();
  st.ov.nproc_per_node.reset();
  if (s == "gpu" || s == "cpu" || s == "auto") st.ov.nproc_mode = s;
  else st.ov.nproc_per_node = std::stoi(s);
}

void check_streams(const json& v, const std::string& path, Problems& out) {
  try {
    (void)parse_streams(str(v), path.c_str());
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    out.push_back({path, msg.substr(path.size() + 2)});  // parse_streams names the flag first
  }
}

void check_hosts(const json& v, const std::string& path, Problems& out) {
  try {
    (void)parse_host_list(str(v));
  } catch (const ConfigError& e) {
    out.push_back({path, e.what()});
  }
}

void apply_hosts(LaunchState& st, const json& v) {
  st.ov.hosts = parse_host_list(str(v));
  st.ov.hosts_from = st.applying;
}

// --hostfile FILE: its hosts, unless -H gave them already.
void apply_hostfile(LaunchState& st, const json& v) {
  if (!st.ov.hosts.empty()) {
    st.problems.push_back({"--hostfile", fmt::format("{} names the hosts already; give one of them", st.ov.hosts_from)});
    return;
  }
  try {
    st.ov.hosts = read_hostfile(str(v));
    st.ov.hosts_from = st.applying;
  } catch (const ConfigError& e) {
    st.problems.push_back({"--hostfile", e.what()});
  }
}

void check_launch_agent(const json& v, const std::string& path, Problems& out) {
  try {
    (void)split_command(str(v));
  } catch (const ConfigError& e) {
    out.push_back({path, e.what()});
  }
}

void check_start_method(const json& v, const std::string& path, Problems& out) {
  const std::string& s = str(v);
  if (s != "spawn" && s != "fork" && s != "forkserver")
    out.push_back({path, fmt::format("'{}' is not spawn, fork or forkserver", s)});
}

// A rule: the setting's name, its type and doc, and its limits.
constexpr FieldInfo rule(const char* name, FieldType type, const char* doc, double min = 0, double max = 0,
                         bool min_exclusive = false,
                         void (*check)(const json&, const std::string&, Problems&) = nullptr) {
  return {name, type, "", doc, min, max, min_exclusive, false, check, nullptr};
}

// clang-format off
const SettingInfo kSettings[] = {
  {rule("nproc_per_node", kStr, "workers per node", 0, 0, false, check_nproc), apply_nproc,
   "/cluster/gpus_per_instance /cluster/procs_per_instance /cluster/instance_type"},
  {rule("total_ranks", kInt, "the world size", 1, 1 << 20), [](LaunchState& st, const json& v) { st.ov.total_ranks = v.get<int>(); }},
  {rule("hosts", kStr, "the job's hosts", 0, 0, false, check_hosts), apply_hosts},
  {rule("hostfile", kStr, "the job's hosts, from a file"), apply_hostfile},
  {rule("launch_agent", kStr, "the command that reaches the hosts", 0, 0, false, check_launch_agent),
   [](LaunchState& st, const json& v) { st.ov.launch_agent = split_command(str(v)); }},
  {rule("node_rank", kInt, "this node's rank", 0, 65535), [](LaunchState& st, const json& v) { st.ov.node_rank = v.get<int>(); }},
  {rule("standalone", kBool, "one node, a rendezvous of its own"),
   [](LaunchState& st, const json& v) { st.ov.standalone = v.get<bool>(); }, "/rendezvous/endpoint"},
  {rule("master_addr", kStr, "node 0's address"), [](LaunchState& st, const json& v) { st.ov.master_addr = str(v); }},
  {rule("master_port", kInt, "the workers' MASTER_PORT", 1, 65535),
   [](LaunchState& st, const json& v) { st.ov.master_port = v.get<int>(); }},
  {rule("role", kStr, "ROLE_NAME"), [](LaunchState& st, const json& v) { st.settings.role = str(v); }},
  {rule("redirects", kStr, "streams to the log files only", 0, 0, false, check_streams),
   [](LaunchState& st, const json& v) {
     st.settings.redirects = parse_streams(str(v), "--redirects");
     st.redirects_set = true;
   }},
  {rule("tee", kStr, "streams to the log files too", 0, 0, false, check_streams),
   [](LaunchState& st, const json& v) { st.tee = parse_streams(str(v), "--tee"); }},
  {rule("local_ranks_filter", kStr, "local ranks on the terminal"),
   [](LaunchState& st, const json& v) { st.local_ranks_filter = str(v); }},
  {rule("ranks", kStr, "ranks on the terminal"), [](LaunchState& st, const json& v) { st.ranks = str(v); }},
  {rule("summary_json", kStr, "the summary's file"), [](LaunchState& st, const json& v) { st.settings.summary_json = str(v); }},
  {rule("progress", kBool, "the progress line"),
   [](LaunchState& st, const json& v) { st.settings.progress = v.get<bool>() ? 1 : 0; }},
  {rule("insecure", kBool, "no token"), [](LaunchState& st, const json& v) { st.settings.insecure = v.get<bool>(); }},
  {rule("spec", kStr, "the job file"), [](LaunchState& st, const json& v) { st.spec_file = str(v); }},
  {rule("set", kStr, "a spec field"), [](LaunchState& st, const json& v) { st.ov.sets.push_back(str(v)); }},
  {rule("python", kStr, "the interpreter"), [](LaunchState& st, const json& v) { st.python = str(v); }},
  {rule("module", kBool, "a module"), [](LaunchState& st, const json& v) { st.module = v.get<bool>(); }, "", true},
  {rule("no_python", kBool, "a program"), [](LaunchState& st, const json& v) { st.no_python = v.get<bool>(); }, "", true},
  {rule("run_path", kBool, "a script by its path"), [](LaunchState& st, const json& v) { st.run_path = v.get<bool>(); },
   "", true},
  // torchrun's flags that dtrain accepts and does not need
  {rule("monitor_interval", kNum, "torchrun's polling period", 0, 86400, true), [](LaunchState&, const json&) {}, "",
   false, "not used; dtrain hears of a worker's exit at once (SIGCHLD), it does not poll"},
  {rule("start_method", kStr, "torchrun's start method", 0, 0, false, check_start_method), [](LaunchState&, const json&) {},
   "", false, "not used; every worker is a process of its own, started with exec (as spawn)"},
  {rule("logs_specs", kStr, "torchrun's LogsSpecs"), [](LaunchState&, const json&) {}, "", false,
   "not used; logs go to LOG_DIR/RUN_ID/attempt-N/rank-R.{out,err} (--log-dir)"},
  {rule("numa_binding", kStr, "torchrun's NUMA binding"), [](LaunchState&, const json&) {}, "", false,
   "not used; dtrain binds with --cpu-bind numa (each rank on its GPU's NUMA node) or core (its share of the cores)"},
  {rule("signals_to_handle", kStr, "torchrun's signals"), [](LaunchState&, const json&) {}, "", false,
   "not used; dtrain forwards SIGINT, SIGTERM, SIGHUP (stopping the job) and SIGUSR1, SIGUSR2 (as they are) to every "
   "worker"},
  {rule("event_log_handler", kStr, "torchrun's event handler"), [](LaunchState&, const json&) {}, "", false,
   "not used; the job's events are in dtrain status and --summary-json"},
};
// clang-format on

}  // namespace

const SettingInfo* find_setting(std::string_view name) {
  for (const auto& s : kSettings)
    if (name == s.rule.path) return &s;
  return nullptr;
}

}  // namespace dtrain::config::detail
