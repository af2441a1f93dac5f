#pragma once
// Where the job of one node stands, as the job machine (agent/src/job_machine.hpp) moves it and the
// agent announces it (AgentHooks::on_state, Agent::state(), the progress line, the rendezvous).
namespace dtrain::agent {

// starting: waiting for the go of this generation (multi-node join) and spawning;
// running: every local worker spawned; stopping: SIGTERM sent, grace running;
// restarting: all stopped, backoff before the next generation; done: run() returns.
enum class JobState { starting, running, stopping, restarting, done };
// "starting", "running", ... (what the rendezvous publishes and `dtrain status` shows)
const char* state_name(JobState s);

}  // namespace dtrain::agent
