#pragma once
// What an agent runs and how (AgentOptions): the resolved plan, and what is the launch's own: its
// output flags, the binary, the store of a multi-node job and how this node enters it.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dtrain/config/plan.hpp"
#include "dtrain/config/streams.hpp"

namespace dtrain::agent {

// Which of a worker's streams go to the log files only (torchrun's --redirects), resolved by config.
using StreamChoice = config::StreamChoice;

// How worker output reaches the terminal and the log files, beyond the spec's output section (tag,
// tag format, timestamps, log_dir: read from the plan's spec): the launch's flags and where to write.
struct OutputOptions {
  std::optional<std::set<int>> terminal_ranks;  // unset: every rank reaches the terminal
  StreamChoice redirects;                       // these streams go to the log files only
  int stdout_fd = 1;                            // where tagged lines go (tests pass a file)
  int stderr_fd = 2;
};

// What the agent runs and how. The job's settings (command, env, workdir, output, grace_s,
// max_runtime_s, restart) are read from plan.spec, resolved once by config (spec + flags +
// environment); plan.json is written from the plan. The rest is the launch's own: its flags, the
// binary, and the store and start of a multi-node job.
struct AgentOptions {
  config::Plan plan;                      // node identity, ranks, batch, spec
  std::vector<std::string> extra_args;    // appended to spec.command
  OutputOptions output;
  bool keep_logs = false;                 // with no output.log_dir: logs in a kept folder under $TMPDIR
  std::string role = "default";           // ROLE_NAME of the workers
  std::string summary_json;               // "" : no JSON summary
  // progress line: 1 always, 0 never, -1 when stderr is a terminal
  int progress = -1;
  std::string self_exe;                   // the dtrain binary; "" : /proc/self/exe
  // The guardian's program: "" : dtrain-shim next to self_exe (or in ../libexec/dtrain/), else
  // `self_exe __guard`; "self" forces the latter. (Workers are forked and exec'd by the agent itself.)
  std::string shim;
  // Rendezvous store for the collectives bootstrap (DTRAIN_STORE_ADDR / _TOKEN / DTRAIN_LOCAL_ADDR).
  // embed_store with no store_addr: the agent serves a store on 127.0.0.1 (free port, random token).
  bool embed_store = false;
  std::string store_addr;                 // "" and !embed_store: not set in the worker env
  std::string store_token;
  std::map<std::string, std::string> store_env;  // more of the store's variables (the etcd backend's DTRAIN_ETCD_*)
  std::string local_addr = "127.0.0.1";
  // MASTER_PORT of a multi-node job's rank table; unset: plan.identity.master_port (--master-port,
  // MASTER_PORT), else a free port on this (master) node
  std::optional<int> master_port;
  // Multi-node: when true every generation waits in `starting` for post(Event::go(g)).
  bool external_start = false;
  int first_generation = 0;               // a node that joins an elastic job later starts at its generation
  // Become a child subreaper and kill processes that left their worker's process group (setsid,
  // double fork) when their generation ends (agent/src/escapees.hpp). The dtrain binary sets it; a
  // process that embeds the agent and has children of its own must leave it off.
  bool reap_escapees = false;
};

}  // namespace dtrain::agent
