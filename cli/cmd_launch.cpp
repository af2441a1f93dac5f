// dtrain launch [OPTIONS] [JOB.json] [-- ARGS...], or dtrain launch [OPTIONS] train.py [ARGS]
// (torchrun's form, command_line.hpp): run a job's workers on this node and supervise them
// (dtrain-launch(1)).
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
#include "dtrain/config/program.hpp"
#include "dtrain/config/plan.hpp"
#include "spec_options.hpp"

namespace dtrain::cli {

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

// torchrun's --redirects / --tee: 0 none, 1 stdout, 2 stderr, 3 both, for every local rank ("3") or
// per local rank ("0:3,1:2").
agent::StreamChoice parse_streams(const std::string& text, const char* flag) {
  agent::StreamChoice c;
  auto bad = [&] {
    return ConfigError(fmt::format("{} {}: expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or LOCAL_RANK:N "
                                   "pairs such as 0:3,1:2", flag, text));
  };
  auto digit = [&](const std::string& d) {
    if (d.size() != 1 || d[0] < '0' || d[0] > '3') throw bad();
    return d[0] - '0';
  };
  if (text.find(':') == std::string::npos) {
    c.all = digit(text);
    return c;
  }
  for (const auto& part : text::split(text, ',')) {
    auto colon = part.find(':');
    if (colon == std::string::npos || colon == 0) throw bad();
    int rank = 0;
    try {
      std::size_t pos = 0;
      rank = std::stoi(part.substr(0, colon), &pos);
      if (pos != colon || rank < 0) throw bad();
    } catch (const std::logic_error&) {
      throw bad();
    }
    c.by_local_rank[rank] = digit(part.substr(colon + 1));
  }
  return c;
}

struct LaunchArgs {
  SpecArgs spec;
  std::string role = "default";
  std::string tee, redirects;
  std::optional<double> grace;
  bool tag = false, no_tag = false, timestamps = false;
  std::string ranks;
  std::string log_dir;
  std::string summary_json;
  bool progress = false, no_progress = false;
};

int launch(const LaunchArgs& a) {
  sys::raise_fd_limit();  // every worker holds pipes and log files open in the agent
  config::Plan plan = load_plan(a.spec, /*job_required=*/false);
  const auto& spec = plan.spec;
  agent::AgentOptions o;
  o.plan_json = config::plan_to_json(plan);
  o.embed_store = true;
  o.reap_escapees = true;  // this process has no children but the ones the agent spawns
  o.master_port = plan.identity.master_port;
  o.role = a.role;
  if (o.role.empty()) throw ConfigError("--role: empty; expected a role name such as trainer (ROLE_NAME)");
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
  if (!a.redirects.empty()) o.output.redirects = parse_streams(a.redirects, "--redirects");
  if (!a.tee.empty()) (void)parse_streams(a.tee, "--tee");  // the log files keep both streams anyway
  o.keep_logs = !a.redirects.empty() || !a.tee.empty();
  o.progress = a.no_progress ? 0 : (a.progress ? 1 : -1);
  o.plan = std::move(plan);
  o.hang_timeout_s = spec.output.hang_timeout_s;
  if (agent::is_multinode(o.plan)) return agent::run_multinode(std::move(o), {a.spec.insecure});
  agent::Agent agent(std::move(o));
  return agent.run();
}

}  // namespace

void register_launch(CLI::App& app, Runner& run, const ProgramWords& words) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* sub = app.add_subcommand(
      "launch", "run a job's workers on this node and supervise them: dtrain launch [OPTIONS] train.py [ARGS], "
                "a job file, or (with neither) the built-in demo job");
  args->spec.program = &words;
  add_spec_options(sub, args->spec);
  sub->add_option("--role", args->role, "the workers' ROLE_NAME (torchrun's; default: default)")->type_name("NAME");
  sub->add_option("--tee", args->tee, "torchrun's: these streams also go to log files (they always do with a log "
                                      "folder): 0-3 or LOCAL_RANK:N,...; keeps the logs")
      ->type_name("N");
  sub->add_option("--redirects", args->redirects, "these streams go to the log files only, not the terminal: 0 none, "
                                                  "1 stdout, 2 stderr, 3 both, or LOCAL_RANK:N,...; keeps the logs")
      ->type_name("N");
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
  sub->footer(
      "After JOB.json, arguments after -- are appended to the job's command; without a job file, the first word "
      "that is not an option starts the program (a Python script, -m MODULE, --no-python PROG, or -- PROG). "
      "torchrun's underscore spellings (--nproc_per_node) work too. Exit status: 0 ok; the root-cause worker's "
      "exit code, or 128+N for signal N; 2 usage or spec error; 69 node lost; 70 hang (output.hang_timeout_s); 71 out of a local resource (disk, open files, port); "
      "75 rendezvous timeout; 77 token refused; 124 max_runtime_s; 126/127 command not executable/not found; "
      "130/143 interrupted. See dtrain-launch(1).");
  sub->callback([args, &run] {
    run = [args] { return launch(*args); };
  });
}

}  // namespace dtrain::cli
