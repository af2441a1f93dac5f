#pragma once
// The per-node agent: spawns the ranked workers of this node, carries their output, stops the whole
// group on the first failure, restarts it when asked, forwards signals and leaves nothing behind.
//
// One Agent::run() drives one libuv loop on the calling thread until the job is over. The job is an
// explicit state machine (JobState); events from other nodes enter through Agent::post(), which is
// thread-safe, and local events leave through AgentHooks (called on the loop thread).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dtrain/config/plan.hpp"
#include "dtrain/config/streams.hpp"

namespace dtrain::agent {

// starting: waiting for the go of this generation (multi-node join) and spawning;
// running: every local worker spawned; stopping: SIGTERM sent, grace running;
// restarting: all stopped, backoff before the next generation; done: run() returns.
enum class JobState { starting, running, stopping, restarting, done };
const char* state_name(JobState s);

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

// What torch's @record (torch.distributed.elastic.multiprocessing.errors) wrote to a worker's
// TORCHELASTIC_ERROR_FILE.
struct ErrorReport {
  std::string file;       // the path
  std::string message;    // "ValueError: bad value"
  std::string traceback;  // extraInfo.py_callstack ("" when absent)
  std::string timestamp;  // extraInfo.timestamp, seconds since the epoch as written ("" when absent)
};

// Why one worker ended.
struct WorkerExit {
  int rank = -1;
  int local_rank = -1;
  int node_rank = 0;
  long pid = 0;
  int exit_code = 0;        // valid when signal == 0
  int signal = 0;           // terminating signal, 0 when it exited
  int exec_errno = 0;       // the command could not be executed (ENOENT, EACCES, ...)
  bool workdir_error = false;  // exec_errno is from entering the workdir, before the exec
  bool stopped_by_agent = false;  // ended after the agent sent it SIGTERM/SIGKILL
  double duration_s = 0;
  std::vector<std::string> last_stderr;  // last lines of its stderr
  std::vector<std::string> first_exception;  // the first Python exception block on its stderr
  std::string error_file;                // its TORCHELASTIC_ERROR_FILE ("" : none)
  std::optional<ErrorReport> error;      // what was written there
  std::optional<int> peer_failure;       // its collectives saw this rank fail (-1: a peer not named)
  std::string hint;                      // advice for the summary (the interpreter of a ModuleNotFoundError)
  // A root cause on another node (multi-node): its host, and its failure as that node reported it
  // (a heading line, then the lines of its error file, first exception or stderr tail).
  bool remote = false;
  std::string host;
  std::vector<std::string> report;
  int status() const;       // exit code, 128+signal, 127/126 on exec failure
  std::string describe() const;  // "exit code 3" / "signal SIGSEGV (11)" / "command not found"
};

// Events from outside the node (the multi-node session), posted from any thread.
struct Event {
  enum class Kind {
    go,            // generation `generation` may start (external_start)
    peer_failed,   // a worker on node `node_rank` failed: stop, then restart if budget is left
    node_lost,     // node `node_rank` went silent: stop and end with exit_code::node_lost
    restart,       // the job moves to generation `generation`: stop and start it
    membership,    // elastic: a node waits to join; restart into `generation` (counted, even past the budget)
    abort,         // stop and end with `exit_code`
  };
  Kind kind = Kind::abort;
  int generation = 0;
  int node_rank = -1;
  int exit_code = 0;
  std::string reason;
  int master_port = 0;  // go: MASTER_PORT of this generation (from the rank table); 0: keep
  // go of an elastic job: this generation's plan (node rank, world size, ranks, batch); null: keep
  std::shared_ptr<const config::Plan> plan{};
  static Event go(int g, int port = 0, std::shared_ptr<const config::Plan> plan = nullptr) {
    return {Kind::go, g, -1, 0, {}, port, std::move(plan)};
  }
};

// Why this node stops its job on its own (no failure of its own workers, no event from elsewhere).
struct SelfStop {
  int signal = 0;       // SIGINT, SIGTERM, SIGHUP; 0 for the others
  int exit_code = 0;    // what this node ends with (130, 143, 124, 70, ...)
  std::string reason;   // "interrupted by SIGINT", "max_runtime_s 5 passed", "hang: ..."
};

// Called on the loop thread: how local events leave the node.
struct AgentHooks {
  std::function<void(JobState, int generation)> on_state;
  // The first local failure of a generation, with the last lines of its stderr (called once that
  // worker's output is read, or a short while after its exit at the latest).
  std::function<void(const WorkerExit&, int generation)> on_local_failure;
  // This node stops on its own (a signal, max_runtime_s, a hang): called before `stopping`.
  std::function<void(const SelfStop&, int generation)> on_self_stop;
  // Every second while workers run: where each local rank is (hang.hpp's lines, and a "stuck: ..."
  // line past the threshold), when some worker uses the collectives library.
  std::function<void(const std::string& text)> on_progress;
};

struct AgentResult {
  int exit_code = 0;
  int restarts = 0;                          // generations started beyond the first
  std::optional<WorkerExit> root_cause;      // first failure of the last generation
  std::vector<WorkerExit> other_failures;
  std::string reason;                        // "", "interrupted by SIGINT", "max_runtime_s 5 passed", ...
  std::string run_dir;                       // plan.json and, when kept, the logs
  std::string logs;                          // the last attempt's log folder; "" when not kept
  int ranks = 0;                             // workers of the job (all nodes)
  int local_ranks = 0;                       // ... on this node
  int node_rank = 0;                         // this node's rank (of the last generation)
  double duration_s = 0;                     // from the start of run() to the end
  std::vector<std::string> hang;             // the stuck ranks and where, when the job hung
};

class Agent {
 public:
  explicit Agent(AgentOptions options, AgentHooks hooks = {});
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs the job to its end; returns the exit status rules of dtrain-launch(1) in result().
  // Throws ConfigError (bad command, workdir, log dir) before anything is spawned.
  int run();
  const AgentResult& result() const;

  // Thread-safe: hands an event to the loop (uv_async). Ignored once the job is done.
  void post(Event e);
  JobState state() const;  // thread-safe snapshot

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Human summary of a failed run (what dtrain launch prints at the end) and its JSON form.
std::string summary_text(const AgentResult& r);
std::string summary_json(const AgentResult& r);
// The one line of a successful run: "dtrain: 4 ranks finished in 12.3 s (no restarts)".
std::string success_line(const AgentResult& r);
// The end of a run on stderr (the summary, or the success line; nothing when stderr_fd < 0) and,
// with `json_path`, the JSON.
void write_summary(const AgentResult& r, int stderr_fd, const std::string& json_path);
// A multi-node job's result as every node reports it: `root` (the root cause the nodes agreed on,
// from its failure event) becomes the root cause, this node's own failures the others; `exit_code`
// the node's exit status.
void adopt_root_cause(AgentResult& r, const std::optional<WorkerExit>& root, int exit_code);

// A job that cannot start here: the command is not there (127) or not executable (126), the workdir
// is not a directory (2). What the agent refuses before spawning, and `dtrain plan` with it.
struct Refusal {
  int code = 0;
  std::string message;
};
std::optional<Refusal> check_command(const config::Plan& plan);

// The hidden entry point of the dtrain binary, dispatched by main() before any CLI parsing:
//   dtrain __guard      guardian: on stdin EOF, SIGKILL every listed group (shim.c)
int guardian_main(int argc, char** argv);

}  // namespace dtrain::agent
