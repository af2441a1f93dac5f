// dtrain launch [JOB.json] [overrides] [-- ARGS...]: run a job's workers on this node and supervise
// them (dtrain-launch(1)).
#include <CLI/CLI.hpp>

#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "app.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/agent/multinode.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/plan.hpp"
#include "launch_args.hpp"
#include "spec_options.hpp"

namespace dtrain::cli {

std::vector<std::string>& launch_extra_args() {
  static std::vector<std::string> args;
  return args;
}

int split_launch_args(int argc, char** argv) {
  int i = 1;
  while (i < argc && argv[i][0] == '-' && std::strcmp(argv[i], "--") != 0) ++i;  // global flags
  if (i >= argc || std::strcmp(argv[i], "launch") != 0) return argc;
  for (int j = i + 1; j < argc; ++j) {
    if (std::strcmp(argv[j], "--") != 0) continue;
    for (int k = j + 1; k < argc; ++k) launch_extra_args().emplace_back(argv[k]);
    argv[j] = nullptr;
    return j;
  }
  return argc;
}

namespace {

// "0,3", "0-3,7"
std::set<int> parse_ranks(const std::string& list, int world_size) {
  std::set<int> out;
  for (const auto& part : text::split(list, ',')) {
    auto bad = [&] {
      return ConfigError(fmt::format("--ranks {}: '{}' is not a rank or a range A-B of ranks 0..{}", list, part,
                                     world_size - 1));
    };
    if (part.empty()) throw bad();
    auto dash = part.find('-');
    int a = 0, b = 0;
    try {
      std::size_t pos = 0;
      if (dash == std::string::npos) {
        a = b = std::stoi(part, &pos);
        if (pos != part.size()) throw bad();
      } else {
        a = std::stoi(part.substr(0, dash), &pos);
        if (pos != dash) throw bad();
        std::string rest = part.substr(dash + 1);
        b = std::stoi(rest, &pos);
        if (pos != rest.size()) throw bad();
      }
    } catch (const std::logic_error&) {
      throw bad();
    }
    if (a < 0 || b < a || b >= world_size) throw bad();
    for (int r = a; r <= b; ++r) out.insert(r);
  }
  return out;
}

struct LaunchArgs {
  SpecArgs spec;
  std::optional<double> grace;
  bool tag = false, no_tag = false, timestamps = false;
  std::string ranks;
  std::string log_dir;
  std::string summary_json;
  bool progress = false, no_progress = false;
  bool insecure = false;
};

int launch(const LaunchArgs& a) {
  sys::raise_fd_limit();  // every worker holds pipes and log files open in the agent
  config::Plan plan = load_plan(a.spec, /*job_required=*/false);
  const auto& spec = plan.spec;
  agent::AgentOptions o;
  o.plan_json = config::plan_to_json(plan);
  o.embed_store = true;
  o.reap_escapees = true;  // this process has no children but the ones the agent spawns
  o.extra_args = launch_extra_args();
  o.grace_s = a.grace ? *a.grace : spec.grace_s;
  if (o.grace_s < 0) throw ConfigError(fmt::format("--grace {}: expected seconds >= 0", o.grace_s));
  o.max_runtime_s = spec.max_runtime_s;
  o.max_restarts = spec.restart.max_restarts;
  o.backoff_s = spec.restart.backoff_s;
  o.log_dir = !a.log_dir.empty() ? a.log_dir : spec.output.log_dir.value_or("");
  o.summary_json = a.summary_json;
  o.output.tag = a.no_tag ? false : (a.tag ? true : spec.output.tag);
  o.output.tag_format = spec.output.tag_format;
  o.output.timestamps = a.timestamps || spec.output.timestamps;
  if (!a.ranks.empty()) o.output.terminal_ranks = parse_ranks(a.ranks, plan.world_size);
  o.progress = a.no_progress ? 0 : (a.progress ? 1 : -1);
  o.plan = std::move(plan);
  if (agent::is_multinode(o.plan)) return agent::run_multinode(std::move(o), {a.insecure});
  agent::Agent agent(std::move(o));
  return agent.run();
}

}  // namespace

void register_launch(CLI::App& app, Runner& run) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* sub = app.add_subcommand(
      "launch", "run a job's workers on this node and supervise them (without JOB: the built-in demo job)");
  add_spec_options(sub, args->spec);
  sub->add_option("--grace", args->grace, "seconds between SIGTERM and SIGKILL when stopping workers (default: grace_s, 10)")
      ->type_name("SECONDS");
  auto* tag = sub->add_flag("--tag", args->tag, "prefix each output line with its rank (output.tag_format)");
  sub->add_flag("--no-tag", args->no_tag, "forward worker output lines without a prefix")->excludes(tag);
  sub->add_flag("--timestamps", args->timestamps, "prefix each output line with the local time");
  sub->add_option("--ranks", args->ranks, "only these ranks' output reaches the terminal, e.g. 0,3 or 0-3 (logs keep all)")
      ->type_name("LIST");
  sub->add_option("--log-dir", args->log_dir,
                  "per-rank log files under DIR/RUN_ID/attempt-N/rank-R.{out,err} (overrides output.log_dir)")
      ->type_name("DIR");
  sub->add_option("--summary-json", args->summary_json, "write the end-of-run summary as JSON to FILE")
      ->type_name("FILE");
  auto* prog = sub->add_flag("--progress", args->progress, "show the job's stage even when stderr is not a terminal");
  sub->add_flag("--no-progress", args->no_progress, "never show the progress line")->excludes(prog);
  sub->add_flag("--insecure", args->insecure, "allow a multi-node job without a rendezvous token (trusted networks only)");
  sub->footer(
      "Arguments after -- are appended to the job's command. Exit status: 0 ok; the root-cause worker's exit "
      "code, or 128+N for signal N; 2 usage or spec error; 69 node lost; 71 out of a local resource (disk, open files, port); 75 rendezvous timeout; 77 token refused; 124 max_runtime_s; 126/127 command not executable/not "
      "found; 130/143 interrupted. See dtrain-launch(1).");
  sub->callback([args, &run] {
    run = [args] { return launch(*args); };
  });
}

}  // namespace dtrain::cli
