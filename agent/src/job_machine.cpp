// The job state machine (job_machine.hpp): every decision about the job's fate, and no effects.
#include "job_machine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>

#include "dtrain/common/exit_codes.hpp"

namespace dtrain::agent {

namespace {

bool failed(const WorkerExit& w) { return w.signal != 0 || w.exit_code != 0 || w.exec_errno != 0; }

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

}  // namespace

std::vector<job::Action> JobMachine::on(const job::Input& input) {
  Actions out;
  if (state_ == JobState::done) return out;  // the job is over: nothing more happens
  std::visit(overloaded{
                 [&](const job::Start&) { start_generation(out); },
                 [&](const job::Spawned&) { enter(JobState::running, out); },
                 [&](const job::SpawnFailed& in) { on_spawn_failed(in, out); },
                 [&](const job::WorkerExited& in) { on_exit(in, out); },
                 [&](const job::Drained& in) { on_drained(in, out); },
                 [&](const job::GraceOver& in) { on_grace(in, out); },
                 [&](const job::BackoffOver&) { on_backoff(out); },
                 [&](const job::RuntimeOver&) { on_runtime(out); },
                 [&](const job::Signal& in) { on_signal(in, out); },
                 [&](const job::Remote& in) { on_remote(in.event, out); },
                 [&](const job::Fatal& in) { on_fatal(in, out); },
                 [&](const job::Hung& in) { on_hung(in, out); },
             },
             input);
  return out;
}

void JobMachine::enter(JobState s, Actions& out) {
  state_ = s;
  out.emplace_back(job::Enter{s});
}

void JobMachine::start_generation(Actions& out) {
  enter(JobState::starting, out);
  if (waiting_for_go()) return;
  spawn(out);
}

void JobMachine::spawn(Actions& out) {
  stop_ = {};
  escalated_ = sent_kill_ = reported_ = false;
  root_.reset();
  out.emplace_back(job::Spawn{generation_, master_port_});
}

// SIGTERM (or SIGKILL) to every live worker; SIGKILL after the grace period.
void JobMachine::begin_stop(int sig, Actions& out) {
  if (state_ == JobState::restarting) out.emplace_back(job::CancelBackoff{});
  enter(JobState::stopping, out);
  if (sig == SIGKILL) sent_kill_ = true;
  out.emplace_back(job::Kill{sig, true, sig != SIGKILL ? std::optional<double>(job_.grace_s) : std::nullopt});
}

void JobMachine::on_spawn_failed(const job::SpawnFailed& in, Actions& out) {
  out.emplace_back(job::Say{fmt::format("dtrain: {}", in.what)});
  stop_ = {StopReason::abort, stop_.signal, in.code, in.what};
  enter(JobState::running, out);
  begin_stop(SIGKILL, out);
}

// The first failure of a running generation is its root cause and stops the group.
void JobMachine::on_exit(const job::WorkerExited& in, Actions& out) {
  bool starting_or_running = state_ == JobState::running || state_ == JobState::starting;
  if (failed(in.exit) && stop_.reason == StopReason::none && starting_or_running) {
    root_ = in.exit;
    stop_.reason = StopReason::failure;
    out.emplace_back(job::LocalFailure{in.exit});
    reported_ = true;
    begin_stop(SIGTERM, out);
    return;
  }
  // a failure of its own while another node's failure stops the job: the nodes hear of it too, so
  // that they all pick the same root cause (a worker that only saw its peer fail is none)
  if (failed(in.exit) && stop_.reason == StopReason::peer_failed && !reported_ && self_inflicted(in.exit)) {
    reported_ = true;
    if (!root_) root_ = in.exit;
    out.emplace_back(job::LocalFailure{in.exit});
  }
  out.emplace_back(job::Progress{});
}

// It failed by itself: not after the agent's SIGTERM (a SIGKILL the agent never sent is not its doing).
bool JobMachine::self_inflicted(const WorkerExit& w) const {
  return !w.stopped_by_agent || (w.signal == SIGKILL && !sent_kill_);
}

void JobMachine::on_drained(const job::Drained& in, Actions& out) {
  if (!collecting()) return;
  // the last lines of stderr belong to the exits we report
  job::Collect c;
  for (const auto& w : in.exits) {
    if (root_ && w.pid == root_->pid) {  // what it said, now that its output is read
      root_->last_stderr = w.last_stderr;
      root_->first_exception = w.first_exception;
      root_->error_file = w.error_file;
      root_->error = w.error;
      root_->peer_failure = w.peer_failure;
      root_->hint = w.hint;
      continue;
    }
    if (failed(w)) c.other_failures.push_back(w);
  }
  // a root cause whose collectives only saw a peer fail yields to that peer's own failure
  if (root_ && root_->peer_failure) {
    for (auto& w : c.other_failures) {
      bool blamed = *root_->peer_failure < 0 || w.rank == *root_->peer_failure;
      if (!blamed || w.peer_failure || !self_inflicted(w)) continue;
      std::swap(*root_, w);
      out.emplace_back(job::LocalFailure{*root_});  // the other nodes hear of it too (they heard the first)
      break;
    }
  }
  c.root_cause = root_;
  out.emplace_back(std::move(c));
  decide(out);
}

// The generation is over: end the job, or restart it while the budget lasts.
void JobMachine::decide(Actions& out) {
  auto finish = [&](int code, std::optional<std::string> reason = std::nullopt) {
    state_ = JobState::done;
    out.emplace_back(job::Finish{code, std::move(reason)});
  };
  switch (stop_.reason) {
    case StopReason::none: return finish(exit_code::ok);
    case StopReason::signal:
      return finish(exit_code::signal_base + stop_.signal, fmt::format("interrupted by {}", signal_name(stop_.signal)));
    case StopReason::timeout: return finish(exit_code::max_runtime, stop_.text);
    case StopReason::hang: return finish(exit_code::hang, stop_.text);
    case StopReason::abort: return finish(stop_.code, stop_.text);
    case StopReason::failure:
    case StopReason::peer_failed:
    case StopReason::peer_restart: break;
  }
  // a command that could not be executed will not run the next time either
  bool restartable = stop_.reason == StopReason::peer_restart ||
                     (restarts_ < job_.restart.max_restarts && !(root_ && root_->exec_errno != 0));
  if (!restartable) {
    if (stop_.reason == StopReason::peer_failed) return finish(stop_.code != 0 ? stop_.code : 1, stop_.text);
    return finish(root_ ? root_->status() : 1);
  }
  ++restarts_;
  std::string why = root_ ? fmt::format("rank {} {}", root_->rank, root_->describe()) : stop_.text;
  out.emplace_back(job::Say{fmt::format("dtrain: {}; restarting the group ({}/{})", why, restarts_,
                                        std::max(job_.restart.max_restarts, restarts_))});
  enter(JobState::restarting, out);
  out.emplace_back(job::ArmBackoff{});
}

void JobMachine::on_grace(const job::GraceOver& in, Actions& out) {
  if (in.live > 0)
    out.emplace_back(job::Say{fmt::format("dtrain: {} worker(s) still running after the {} s grace period: SIGKILL",
                                          in.live, job_.grace_s)});
  sent_kill_ = true;
  out.emplace_back(job::Kill{SIGKILL});
}

void JobMachine::on_backoff(Actions& out) {
  if (state_ != JobState::restarting) return;
  generation_ = next_generation_ ? *next_generation_ : generation_ + 1;
  next_generation_.reset();
  start_generation(out);
}

void JobMachine::on_runtime(Actions& out) {
  if (stop_.reason == StopReason::signal || stop_.reason == StopReason::abort || stop_.reason == StopReason::hang)
    return;
  stop_.reason = StopReason::timeout;
  stop_.text = fmt::format("max_runtime_s {} passed", job_.max_runtime_s.value_or(0));
  out.emplace_back(job::Say{fmt::format("dtrain: {}: stopping the job", stop_.text)});
  out.emplace_back(job::SelfStopped{{0, exit_code::max_runtime, stop_.text}});
  begin_stop(SIGTERM, out);
}

// No progress: the job fails as hung (not restarted: the same hang would follow). The rank it hangs
// on, when it is local, is the root cause, and the other nodes hear of it as a failure (they end
// with 70 too); else this node tells them it stops.
void JobMachine::on_hung(const job::Hung& in, Actions& out) {
  if (state_ != JobState::running || stop_.reason != StopReason::none) return;
  stop_.reason = StopReason::hang;
  stop_.text = in.what;
  out.emplace_back(job::Say{fmt::format("dtrain: {}: stopping the job", in.what)});
  if (in.culprit) {
    root_ = in.culprit;
    reported_ = true;
    out.emplace_back(job::LocalFailure{*in.culprit});
  } else {
    out.emplace_back(job::SelfStopped{{0, exit_code::hang, in.what}});
  }
  begin_stop(SIGTERM, out);
}

// SIGUSR1/2 are forwarded; INT/TERM/HUP stop the job, and a second one while stopping kills.
void JobMachine::on_signal(const job::Signal& in, Actions& out) {
  if (in.sig == SIGUSR1 || in.sig == SIGUSR2) {
    out.emplace_back(job::Kill{in.sig});
    return;
  }
  if (state_ == JobState::stopping) {
    // an interrupt during a stop only escalates; the cause of the stop (a root cause) is kept
    if (!escalated_ && in.live > 0) {
      escalated_ = true;
      out.emplace_back(job::Say{fmt::format("dtrain: {} again: killing the workers now", signal_name(in.sig))});
      sent_kill_ = true;
      out.emplace_back(job::Kill{SIGKILL});
    }
    return;
  }
  stop_.reason = StopReason::signal;
  stop_.signal = in.sig;
  out.emplace_back(job::Say{fmt::format("dtrain: {}: stopping {} worker(s) (grace {} s; again to kill them now)",
                                        signal_name(in.sig), in.live, job_.grace_s)});
  out.emplace_back(job::SelfStopped{{in.sig, exit_code::signal_base + in.sig, "interrupted by " + signal_name(in.sig)}});
  if (idle()) return enter(JobState::stopping, out);  // no worker: the generation drains at once
  begin_stop(in.sig, out);
}

void JobMachine::on_remote(const Event& e, Actions& out) {
  using K = Event::Kind;
  switch (e.kind) {
    case K::go:
      go_generation_ = std::max(go_generation_, e.generation);
      if (e.master_port > 0) master_port_ = e.master_port;
      if (state_ == JobState::starting && generation_ <= go_generation_) spawn(out);
      return;
    case K::peer_failed:
      if (stop_.reason != StopReason::none) return;
      stop_.reason = StopReason::peer_failed;
      stop_.code = e.exit_code;
      stop_.text = e.reason.empty() ? fmt::format("a worker on node {} failed", e.node_rank) : e.reason;
      break;
    case K::node_lost:
      stop_.reason = StopReason::abort;
      stop_.code = exit_code::node_lost;
      stop_.text = e.reason.empty() ? fmt::format("node {} was lost", e.node_rank) : e.reason;
      break;
    case K::membership:  // counted as a restart, and never refused for want of budget: every node must follow
    case K::restart:
      if (stop_.reason == StopReason::signal || stop_.reason == StopReason::abort ||
          stop_.reason == StopReason::timeout || stop_.reason == StopReason::hang)
        return;
      stop_.reason = StopReason::peer_restart;
      next_generation_ = e.generation;
      stop_.text = e.reason.empty() ? fmt::format("the job moves to generation {}", e.generation) : e.reason;
      break;
    case K::abort:
      stop_.reason = StopReason::abort;
      stop_.code = e.exit_code;
      stop_.text = e.reason;
      break;
  }
  out.emplace_back(job::Say{fmt::format("dtrain: {}: stopping the local workers", stop_.text)});
  if (idle()) return enter(JobState::stopping, out);
  if (state_ == JobState::stopping) return;  // already stopping: the new cause decides the end
  begin_stop(SIGTERM, out);
}

void JobMachine::on_fatal(const job::Fatal& in, Actions& out) {
  if (stop_.reason != StopReason::abort) stop_ = {StopReason::abort, stop_.signal, exit_code::internal, in.what};
  begin_stop(SIGKILL, out);
}

}  // namespace dtrain::agent
