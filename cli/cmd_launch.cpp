// dtrain launch [OPTIONS] [JOB.json] [-- ARGS...], or dtrain launch [OPTIONS] train.py [ARGS]
// (torchrun's form, command_line.hpp): run a job's workers on this node and supervise them
// (dtrain-launch(1)).
#include <CLI/CLI.hpp>

#include <memory>

#include <fmt/format.h>

#include "app.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/agent/multinode.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/system.hpp"
#include "spec_options.hpp"

namespace dtrain::cli {

namespace {

int launch(LaunchArgs& a) {
  sys::raise_fd_limit();  // every worker holds pipes and log files open in the agent
  // the resolved launch (spec + flags + environment); the agent reads the job's settings from it
  config::Launch l = resolve(a, /*job_required=*/false);
  // -H/--hosts from a machine that is not one of the hosts: this launch has no node of its own
  if (const auto& hosts = l.plan.hosts; hosts && hosts->this_host < 0)
    throw ConfigError(fmt::format("{}: this machine ({}) is not one of the hosts; run dtrain launch with the same "
                                  "words on each host (its node rank is its place in the list, or --node-rank R)",
                                  hosts->from, l.plan.identity.host));
  agent::AgentOptions o;
  o.embed_store = true;
  o.reap_escapees = true;  // this process has no children but the ones the agent spawns
  o.role = l.settings.role;
  o.summary_json = l.settings.summary_json;
  o.output.terminal_ranks = l.settings.terminal_ranks;
  o.output.redirects = l.settings.redirects;
  o.keep_logs = l.settings.keep_logs;
  o.progress = l.settings.progress;
  o.plan = std::move(l.plan);
  if (agent::is_multinode(o.plan)) return agent::run_multinode(std::move(o), {l.settings.insecure});
  agent::Agent agent(std::move(o));
  return agent.run();
}

}  // namespace

void register_launch(CLI::App& app, Runner& run, const ProgramWords& words) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* sub = app.add_subcommand(
      "launch", "run a job's workers on this node and supervise them: dtrain launch [OPTIONS] train.py [ARGS], "
                "a job file, or (with neither) the built-in demo job");
  args->words = &words;
  add_launch_options(sub, *args);
  sub->footer(
      "After JOB.json, arguments after -- are appended to the job's command; without a job file, the first word "
      "that is not an option starts the program (a Python script, -m MODULE, --no-python PROG, or -- PROG). "
      "torchrun's underscore spellings (--nproc_per_node) and PET_<FLAG> variables work too (command line > job "
      "spec > PET_* > environment). Exit status: 0 ok; the root-cause worker's "
      "exit code, or 128+N for signal N; 2 usage or spec error; 69 node lost; 70 hang (output.hang_timeout_s); 71 out of a local resource (disk, open files, port); "
      "75 rendezvous timeout; 77 token refused; 124 max_runtime_s; 126/127 command not executable/not found; "
      "130/143 interrupted. See dtrain-launch(1).");
  sub->callback([args, &run] {
    run = [args] { return launch(*args); };
  });
}

}  // namespace dtrain::cli
