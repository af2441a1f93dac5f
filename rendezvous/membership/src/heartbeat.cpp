// Heartbeat (heartbeat.hpp): the built-in session's heartbeat thread.
#include "dtrain/rendezvous/membership/heartbeat.hpp"

#include <utility>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"

namespace dtrain::rdzv {
void Heartbeat::start(TcpStore& session, int node_rank, std::function<void(const std::string&)> on_lost) {
  stop();
  {
    std::lock_guard lock(mu_);
    stop_ = false;
    peers_.clear();  // a new generation's keys: the others publish theirs afresh
  }
  thread_ = std::thread([this, &session, node_rank, on_lost = std::move(on_lost)] { loop(session, node_rank, on_lost); });
}

void Heartbeat::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::set_state(std::string state, int running, int exited, int restarts) {
  std::lock_guard lock(mu_);
  state_ = std::move(state);
  running_ = running;
  exited_ = exited;
  restarts_ = restarts;
}

void Heartbeat::set_progress(std::string text) {
  std::lock_guard lock(mu_);
  progress_ = std::move(text);
}

void Heartbeat::set_figures(std::string text, int nodes) {
  std::lock_guard lock(mu_);
  figures_ = std::move(text);
  nodes_ = nodes;
}

std::map<int, std::string> Heartbeat::peer_figures() const {
  std::lock_guard lock(mu_);
  return peers_;
}

// Stores this node's figures (when they changed) and reads up to kFiguresPerBeat other nodes' (off the lock).
void Heartbeat::exchange_figures(TcpStore& session, int node_rank, std::optional<std::string> mine, int nodes) {
  if (mine) session.set(figures_key(node_rank), as_bytes(*mine));
  std::map<int, std::string> read;
  int start = next_peer_;
  for (int i = 0, asked = 0; i < nodes && asked < kFiguresPerBeat; ++i) {
    int n = (start + i) % nodes;
    if (n == node_rank) continue;
    ++asked;
    next_peer_ = (n + 1) % nodes;
    std::vector<std::string> key{figures_key(n)};
    if (session.check(key)) read[n] = to_string(session.get(key[0], reply_timeout_));
  }
  std::lock_guard lock(mu_);
  for (auto& [n, text] : read) peers_[n] = std::move(text);
}

void Heartbeat::loop(TcpStore& session, int node_rank, const std::function<void(const std::string&)>& on_lost) {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_for(lock, interval_, [&] { return stop_; });
    if (stop_) return;
    wire::Frame hb(wire::Op::heartbeat);
    hb.str(state_).i64(running_).i64(exited_).i64(restarts_);
    std::optional<std::string> progress = std::exchange(progress_, std::nullopt);
    std::optional<std::string> figures = std::exchange(figures_, std::nullopt);
    int nodes = nodes_;
    lock.unlock();
    try {
      session.call(hb, reply_timeout_);
      if (progress) session.set(progress_key(node_rank), as_bytes(*progress));
      if (nodes > 1) exchange_figures(session, node_rank, std::move(figures), nodes);
    } catch (const Error& e) {
      lock.lock();
      if (stop_) return;
      lock.unlock();
      on_lost(fmt::format("heartbeat to the rendezvous failed: {}", e.what()));
      return;
    }
    lock.lock();
  }
}

}  // namespace dtrain::rdzv
