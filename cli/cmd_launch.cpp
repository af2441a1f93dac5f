// dtrain launch [OPTIONS] [JOB.json] [-- ARGS...], or dtrain launch [OPTIONS] train.py [ARGS]
// (torchrun's form, command_line.hpp): run a job's workers on this node and supervise them, or,
// with -H/--hostfile, on every host (dtrain-launch(1)).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <climits>
#include <memory>

#include <fmt/format.h>

#include "app.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/agent/multinode.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/hosts.hpp"
#include "dtrain/remote/head.hpp"
#include "dtrain/remote/head_link.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "spec_options.hpp"

extern char** environ;

namespace dtrain::cli {

namespace {

std::string host_word(const config::HostSlots& h) {
  std::string name = h.name.find(':') != std::string::npos ? "[" + h.name + "]" : h.name;
  return h.slots ? fmt::format("{}:{}", name, *h.slots) : name;
}

// The head's launch words again, for each host: the hostfile's hosts as --hosts (the file is the
// head's), without what only the head uses (the token file, the launch agent).
std::vector<std::string> host_words(const LaunchArgs& a) {
  const config::LaunchInput& in = a.input;
  std::vector<std::string> out;
  for (const config::FlagValue& f : in.flags) {
    const std::string target = f.row->target;
    if (target == "launch_agent" || target == "/rendezvous/token_file") continue;
    if (target == "hostfile" || target == "hosts") {
      std::vector<std::string> hosts;
      for (const auto& h : target == "hosts" ? config::parse_host_list(f.text) : config::read_hostfile(f.text))
        hosts.push_back(host_word(h));
      out.push_back("--hosts=" + text::join(hosts, ","));
      continue;
    }
    std::string name;
    for (const auto& n : config::flag_names(*f.row))
      if (name.empty() && n.rfind("--", 0) == 0) name = n;
    if (f.row->kind == config::FlagKind::toggle) {
      out.push_back(name.empty() ? config::flag_names(*f.row).front() : name);
    } else if (name.empty()) {
      out.push_back(config::flag_names(*f.row).front());
      out.push_back(f.text);
    } else {
      out.push_back(name + "=" + f.text);
    }
  }
  if (!in.job_file.empty()) out.push_back(in.job_file);
  if (!in.appended.empty() || in.after_dashdash) out.push_back("--");
  out.insert(out.end(), in.appended.begin(), in.appended.end());
  for (const auto& w : in.program)
    if (!w.empty()) out.push_back(w);
  return out;
}

int launch_hosts(const LaunchArgs& a, const config::Launch& l) {
  const config::HostsPlan& h = *l.plan.hosts;
  const auto& rs = l.plan.spec.rendezvous;
  remote::HeadJob job;
  job.hosts = h.names;
  job.this_host = h.this_host;
  job.launch_agent = h.launch_agent;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw ConfigError("cannot find this dtrain's own path (/proc/self/exe), which every host runs");
  job.dtrain.assign(self, static_cast<std::size_t>(n));
  job.words = host_words(a);
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) != nullptr) job.cwd = cwd;
  // the user's token, else one of this launch's own: it reaches each host over its standard input
  job.token = rdzv::auth::resolve_token(rs.token_file.value_or(""));
  if (job.token.empty()) job.token = rdzv::auth::new_token();
  job.env = remote::head_env(environ);
  job.patience_s = l.plan.spec.grace_s + rs.heartbeat_timeout_s.value_or(3 * rs.heartbeat_s) + 5;
  return remote::run_head(job);
}

int launch(LaunchArgs& a) {
  sys::raise_fd_limit();  // every worker holds pipes and log files open in the agent
  // the resolved launch (spec + flags + environment); the agent reads the job's settings from it
  config::Launch l = resolve(a, /*job_required=*/false);
  // the head runs `dtrain launch` on every host (remote/head.hpp), with a token of its own when the user gave none
  if (config::starts_every_host(l.plan)) return launch_hosts(a, l);
  agent::MultiNodeOptions mn;
  mn.insecure = l.settings.insecure;
  if (const auto& token = remote::head_token()) {  // started by a head: its token, its signals
    mn.token = *token;
    mn.joined = remote::tell_head_joined;
    remote::watch_head();
  }
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
  if (agent::is_multinode(o.plan)) return agent::run_multinode(std::move(o), mn);
  agent::Agent agent(std::move(o));
  return agent.run();
}

}  // namespace

void register_launch(CLI::App& app, Runner& run, const ProgramWords& words) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* sub = app.add_subcommand(
      "launch", "run a job's workers on this node and supervise them: dtrain launch [OPTIONS] train.py [ARGS], "
                "a job file, or (with neither) the built-in demo job; with -H or --hostfile, on every host");
  args->words = &words;
  add_launch_options(sub, *args);
  sub->footer(
      "After JOB.json, arguments after -- are appended to the job's command; without a job file, the first word "
      "that is not an option starts the program (a Python script, -m MODULE, --no-python PROG, or -- PROG). "
      "torchrun's underscore spellings (--nproc_per_node) and PET_<FLAG> variables work too (command line > job "
      "spec > PET_* > environment). With -H or --hostfile (and no --node-rank) this launch starts dtrain launch on "
      "every host through --launch-agent (ssh), streams their output and stops them all together. Exit status: 0 ok; "
      "the root-cause worker's exit code, or 128+N for signal N; 2 usage or spec error; 69 node lost (also a host "
      "whose ssh failed); 70 hang (output.hang_timeout_s); 71 out of a local resource (disk, open files, port); "
      "75 rendezvous timeout; 77 token refused; 124 max_runtime_s; 126/127 command (or launch agent) not executable/"
      "not found; 130/143 interrupted. See dtrain-launch(1).");
  sub->callback([args, &run] {
    run = [args] { return launch(*args); };
  });
}

}  // namespace dtrain::cli
