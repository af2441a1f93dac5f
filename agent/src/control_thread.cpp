// ControlThread (control_thread.hpp): one queue in, the bridge's actions out.
#include "control_thread.hpp"

#include "dtrain/agent/stacks.hpp"
#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

ControlThread::ControlThread(std::unique_ptr<rdzv::Membership> session, const NodeConfig& cfg,
                             const rdzv::JoinResult& first, config::Plan base, int progress_mode, int stderr_fd)
    : session_(std::move(session)),
      machine_(bridge::BridgeConfig{first.self.node_rank, cfg.slots, cfg.where(), cfg.barrier_limit,
                                    cfg.min_instances > 0}),
      first_(first),
      base_(std::move(base)),
      endpoint_(cfg.where()),
      line_(progress_mode, stderr_fd),
      stderr_fd_(stderr_fd) {
  session_->set_stacks_source([ranks = ranks_] {
    std::string dir;
    std::vector<int> local;
    {
      std::lock_guard lk(ranks->mu);
      dir = ranks->run_dir;
      local = ranks->local;
    }
    if (dir.empty()) return pack_stacks({{"no stack: this node's workers have not started"}, {}});
    auto stacks = dump_stacks(dir, local);
    return pack_stacks({stack_summary(stacks), stack_lines(stacks)});
  });
}

ControlThread::~ControlThread() {
  if (thread_.joinable()) {
    agent_done(exit_code::internal, "the multi-node driver stopped");
    thread_.join();
  }
  session_.reset();  // stops its threads (they enqueue here) before the queue goes
}

AgentHooks ControlThread::hooks() {
  AgentHooks h;
  h.on_state = [this](JobState s, int g) { push(bridge::AgentState{s, g}); };
  h.on_local_failure = [this](const WorkerExit& w, int g) { push(bridge::LocalFailure{w, g}); };
  h.on_self_stop = [this](const SelfStop& s, int g) { push(bridge::SelfStopped{s, g}); };
  // thread-safe, and the session outlives the agent: no need to pass through the queue
  h.on_progress = [this](const std::string& text) { session_->set_progress(text); };
  h.on_figures = [this, nodes = base_.instances](const std::string& text) { session_->set_figures(text, nodes); };
  h.peer_figures = [this] { return session_->peer_figures(); };
  h.on_ranks = [ranks = ranks_](const std::string& run_dir, const std::vector<int>& local) {
    std::lock_guard lk(ranks->mu);
    ranks->run_dir = run_dir;
    ranks->local = local;
  };
  return h;
}

void ControlThread::start(Post post) {
  post_ = std::move(post);
  push(bridge::Joined{first_.generation, first_.self.master_port, first_.self.node_rank});
  thread_ = std::thread([this] { loop(); });
}

void ControlThread::agent_failed(const std::exception& e) {
  if (!thread_.joinable()) start({});
  agent_done(exit_status_of(e), e.what());
}

void ControlThread::agent_done(int code, std::string reason) {
  {
    std::lock_guard lk(mu_);
    if (done_posted_) return;
    done_posted_ = true;
  }
  push(bridge::AgentDone{code, std::move(reason)});
  // a re-join in progress waits for nodes that will never come for this node: end it now (a
  // membership that is already established stays usable for the report and the exit barrier)
  session_->cancel_join();
}

int ControlThread::wait() {
  if (thread_.joinable()) thread_.join();
  return status_;
}

void ControlThread::push(bridge::Input in) {
  {
    std::lock_guard lk(mu_);
    inbox_.push_back(std::move(in));
  }
  cv_.notify_one();
}

// The next input; SettleOver when a Settle's time is up first.
std::optional<bridge::Input> ControlThread::pop() {
  std::unique_lock lk(mu_);
  auto ready = [this] { return !inbox_.empty(); };
  if (!settle_until_) {
    cv_.wait(lk, ready);
  } else if (!cv_.wait_until(lk, *settle_until_, ready)) {
    settle_until_.reset();
    return bridge::SettleOver{};
  }
  bridge::Input in = std::move(inbox_.front());
  inbox_.pop_front();
  return in;
}

void ControlThread::loop() {
  while (!machine_.ended()) {
    std::optional<bridge::Input> in = pop();
    while (in) {
      std::optional<bridge::Input> answer;
      for (const auto& a : machine_.on(*in)) {
        try {
          answer = perform(a);
        } catch (const std::exception& e) {  // a broken invariant: stop this node's job with it
          DTRAIN_ERROR(agent, "multi-node driver: {}", e.what());
          answer = bridge::JoinFailed{machine_.generation(), exit_code::internal, e.what()};
        }
        if (answer) break;  // an action that answers ends its batch: the answer decides what follows
      }
      in = std::move(answer);
    }
  }
}

std::optional<bridge::Input> ControlThread::perform(const bridge::Action& a) {
  if (auto* x = std::get_if<bridge::StartMonitoring>(&a)) return start_monitoring(x->generation);
  if (auto* x = std::get_if<bridge::Rejoin>(&a)) return rejoin(x->generation);
  if (auto* x = std::get_if<bridge::ExitBarrier>(&a)) return exit_barrier(x->limit);
  if (auto* x = std::get_if<bridge::Post>(&a); x != nullptr && post_) post_(x->event);
  if (auto* x = std::get_if<bridge::Publish>(&a)) session_->set_local_state(x->state, x->running, 0, x->generation);
  if (auto* x = std::get_if<bridge::Report>(&a)) report(*x);
  if (auto* x = std::get_if<bridge::ReportStop>(&a)) report_stop(*x);
  if (auto* x = std::get_if<bridge::End>(&a)) end(*x);
  if (auto* x = std::get_if<bridge::Settle>(&a)) settle_until_ = std::chrono::steady_clock::now() + x->limit;
  return std::nullopt;
}

std::optional<bridge::Input> ControlThread::start_monitoring(int generation) {
  try {
    session_->start_monitoring([this, generation](const rdzv::Event& e) { push(bridge::JobEvent{e, generation}); });
    return std::nullopt;
  } catch (const std::exception& e) {
    bridge::JoinFailed f = bridge::join_failure(generation, e);
    f.reason = fmt::format("watching the job's events: {}", f.reason);
    return f;
  }
}

std::optional<bridge::Input> ControlThread::rejoin(int generation) {
  try {
    rdzv::JoinResult r = join_with_line(*session_, generation, line_, endpoint_);
    if (!base_.elastic()) {
      check_same_ranks(first_.self, r);
      return bridge::Joined{generation, r.self.master_port, r.self.node_rank};
    }
    auto plan = std::make_shared<const config::Plan>(plan_for(base_, r));
    return bridge::Joined{generation, r.self.master_port, r.self.node_rank, std::move(plan)};
  } catch (const std::exception& e) {
    return bridge::join_failure(generation, e);
  }
}

std::optional<bridge::Input> ControlThread::exit_barrier(std::chrono::milliseconds limit) {
  try {
    return bridge::barrier_outcome(session_->finish(limit), endpoint_);
  } catch (const std::exception& e) {
    return bridge::barrier_failure(e);
  }
}

void ControlThread::report(const bridge::Report& r) {
  try {
    session_->report_failure(r.rank, r.exit_code, r.signal, r.message);
  } catch (const std::exception& e) {
    if (r.rank < 0)
      DTRAIN_WARN(agent, "cannot report this node's failure to the rendezvous: {}", e.what());
    else
      DTRAIN_WARN(agent, "cannot report the failure of rank {} to the rendezvous: {}", r.rank, e.what());
  }
}

void ControlThread::report_stop(const bridge::ReportStop& r) {
  try {
    session_->report_stop(r.exit_code, r.signal, r.message);
  } catch (const std::exception& e) {
    DTRAIN_WARN(agent, "cannot tell the other nodes that this one stops ({}): {}", r.message, e.what());
  }
}

void ControlThread::end(const bridge::End& e) {
  status_ = e.exit_code;
  root_ = e.root;
  if (!e.message.empty()) write_all(stderr_fd_, "dtrain: " + e.message + "\n");
}

}  // namespace dtrain::agent
