#pragma once
// The per-node agent: spawns the ranked workers of this node, carries their output, stops the whole
// group on the first failure, restarts it when asked, forwards signals and leaves nothing behind.
//
// One Agent::run() drives one libuv loop on the calling thread until the job is over. The job is an
// explicit state machine (JobState); events from other nodes enter through Agent::post(), which is
// thread-safe, and local events leave through AgentHooks (called on the loop thread).
//
// The agent's vocabulary, each in a header of its own: options.hpp (what it runs and how),
// events.hpp (events in, hooks out), job_state.hpp, worker_exit.hpp (why a worker ended),
// result.hpp (what the run ended with, and the summary), check_command.hpp (what it refuses).
#include <memory>

#include "dtrain/agent/check_command.hpp"
#include "dtrain/agent/events.hpp"
#include "dtrain/agent/job_state.hpp"
#include "dtrain/agent/options.hpp"
#include "dtrain/agent/result.hpp"
#include "dtrain/agent/worker_exit.hpp"

namespace dtrain::agent {

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

// The hidden entry point of the dtrain binary, dispatched by main() before any CLI parsing:
//   dtrain __guard      guardian: on stdin EOF, SIGKILL every listed group (shim.c)
int guardian_main(int argc, char** argv);

}  // namespace dtrain::agent
