// Shared-memory engine: syncs, waiting and failures. Every call starts with a sync whose arrival
// carries the call's fingerprint; after it each rank compares all fingerprints, so mismatched calls
// fail on every rank instead of hanging. Waiting: an adaptive spin (longer while peers keep arriving
// within it; yielding instead of pausing when there are more local ranks than CPUs), then futex
// sleep in slices (abort, liveness and deadline checks between them).
#include <signal.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "../../wait.hpp"
#include "shm_engine.hpp"
#include "shm_layout.hpp"

namespace dtrain::coll::shm {


void Engine::abort(dtrain_status_t status, const std::string& msg) noexcept {
  if (hdr_ == nullptr) return;
  std::int32_t expected = -1;
  if (hdr_->abort_rank.compare_exchange_strong(expected, me_)) {
    std::size_t m = std::min(msg.size(), sizeof(hdr_->abort_msg) - 1);
    std::memcpy(hdr_->abort_msg, msg.data(), m);
    hdr_->abort_msg[m] = '\0';
    hdr_->abort_status.store(static_cast<std::uint32_t>(status));
    hdr_->abort_ready.store(1, std::memory_order_release);
  }
  hdr_->phase.fetch_add(0);
  // Wake sleepers (in collectives and point-to-point calls); they see the abort record on their
  // next check.
  futex_wake_all(hdr_->phase, hdr_->sleepers);
  for (int j = 0; j < n_; ++j)
    if (j != me_) ring_bell(j);
}

void Engine::begin(const OpDesc& d) {
  auto& c = ctl_[me_];
  const int par = static_cast<int>(calls_++ & 1u);
  c.fp[par][0].store(d.fp0(), std::memory_order_relaxed);
  c.fp[par][1].store(d.fp1(), std::memory_order_relaxed);
  c.fp[par][2].store(d.seq, std::memory_order_release);  // after fp0, fp1 (check_peer_calls)
  c.kind.store(static_cast<std::uint32_t>(d.kind), std::memory_order_relaxed);
  c.seq.store(d.seq, std::memory_order_relaxed);
  c.busy.store(1, std::memory_order_release);
  first_sync_ = true;
}

void Engine::end() { ctl_[me_].busy.store(0, std::memory_order_release); }

void Engine::check_abort(const OpDesc& d) {
  if (hdr_->abort_ready.load(std::memory_order_acquire) == 0) return;
  const int who = hdr_->abort_rank.load();
  auto st = static_cast<dtrain_status_t>(hdr_->abort_status.load());
  if (st == DTRAIN_SUCCESS) st = DTRAIN_ERR_PEER;
  throw CollError(st, fmt::format("{} on rank {}: rank {} failed: {}", d.text(), granks_[me_],
                                  granks_[static_cast<std::size_t>(who)], hdr_->abort_msg));
}

// Local rank j destroyed its communicator before it arrived, or its process is gone. arrived() is
// asked after the peer's state is read: a peer that arrives and then leaves at once (its last call
// done) has arrived, and what it left here stays readable.
void Engine::check_peer(const OpDesc& d, int j, const std::function<bool()>& arrived) {
  const auto& c = ctl_[j];
  const bool destroyed = c.state.load() == 1;
  const std::int32_t pid = c.pid.load();
  const bool dead = !destroyed && pid > 0 && pid != static_cast<std::int32_t>(::getpid()) && ::kill(pid, 0) != 0 &&
                    errno == ESRCH;
  if ((!destroyed && !dead) || arrived()) return;
  const auto kind = op_kind_name(static_cast<OpKind>(c.kind.load()));
  if (destroyed)
    throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} destroyed its communicator instead of "
                                                 "joining (it had reached {} #{})",
                                                 d.text(), granks_[me_], granks_[j], kind, c.seq.load()));
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} (pid {}) died; it had reached {} #{}", d.text(),
                                               granks_[me_], granks_[j], pid, kind, c.seq.load()));
}

void Engine::check_abort_and_peers(const OpDesc& d) {
  check_abort(d);
  for (int j = 0; j < n_; ++j)
    if (j != me_) check_peer(d, j, [&] { return ctl_[j].epoch.load() >= epoch_; });
  check_peer_calls(d, [&] {
    for (int j = 0; j < n_; ++j)
      if (ctl_[j].epoch.load(std::memory_order_acquire) < epoch_) return false;
    return true;
  });
}

// A peer that entered this engine call as another call (the latency path and the syncs never meet,
// so their ranks would wait for each other until the deadline). Each rank keeps its fingerprints by
// the parity of its engine calls, so the peer's slot of this parity holds this engine call once the
// peer began it (two engine calls with one sequence number, as the hierarchical engine makes, have
// different parities). ready(): whether what this rank waits for has come after all, checked
// before it calls a difference a mismatch.
void Engine::check_peer_calls(const OpDesc& d, const std::function<bool()>& ready) {
  const int par = static_cast<int>((calls_ - 1) & 1u);
  for (int j = 0; j < n_; ++j) {
    const auto& f = ctl_[j].fp[par];
    if (j == me_ || f[2].load(std::memory_order_acquire) != d.seq) continue;
    if (f[0].load(std::memory_order_relaxed) == d.fp0() && f[1].load(std::memory_order_relaxed) == d.fp1()) continue;
    if (ready()) return;
    std::string calls;
    for (int k = 0; k < n_; ++k) {
      const auto& g = ctl_[k].fp[par];
      calls += fmt::format("; rank {}: {} #{}", granks_[k], describe_fingerprint(g[0].load(), g[1].load()),
                           g[2].load());
    }
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched collective calls at call #{} (every rank must make the same calls with "
                                "the same count, dtype, op and root){}",
                                d.seq, calls));
  }
}

void Engine::fail_timeout(const OpDesc& d, const std::function<bool(int)>& arrived_at) {
  std::string missing, where;
  for (int j = 0; j < n_; ++j) {
    const auto& c = ctl_[j];
    const bool arrived = arrived_at(j);
    if (!arrived) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", granks_[j]);
    where += fmt::format("; rank {}: {} {} #{}{}", granks_[j], c.busy.load() ? "in" : "last finished",
                         op_kind_name(static_cast<OpKind>(c.kind.load())), c.seq.load(),
                         arrived ? "" : " (not arrived)");
  }
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}: ranks [{}] never arrived{}",
                                                  d.text(), seconds_text(d.timeout()), granks_[me_], missing, where));
}

void Engine::sync(const OpDesc& d) {
  // Each rank publishes its own epoch (one cache line per rank, no shared counter) and waits until
  // every rank's epoch reached it. Sleepers wait on the shared phase word; an arrival only bumps it
  // and enters the kernel when someone sleeps.
  ++epoch_;
  ctl_[me_].epoch.store(epoch_, std::memory_order_seq_cst);
  if (hdr_->sleepers.load(std::memory_order_seq_cst) != 0) {
    hdr_->phase.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(hdr_->phase, hdr_->sleepers);
  }
  wait_all(d);
  if (first_sync_) {
    first_sync_ = false;
    check_fingerprints(d);
  }
}

void Engine::wait_all(const OpDesc& d) {
  auto all_arrived = [&] {
    for (int j = 0; j < n_; ++j)
      if (ctl_[j].epoch.load(std::memory_order_acquire) < epoch_) return false;
    return true;
  };
  if (all_arrived()) return;
  // 1. Spin while the peers are likely running (Engine::spin, shm_layout.hpp).
  const auto t0 = Clock::now();
  if (spin(all_arrived)) return;
  // 2. Sleep in slices, checking abort records, peer liveness and the deadline between them.
  bool done = false;
  while (!done) {
    check_abort_and_peers(d);
    if (Clock::now() >= d.deadline)
      fail_timeout(d, [&](int j) { return ctl_[j].epoch.load() >= epoch_; });
    hdr_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t p = hdr_->phase.load(std::memory_order_seq_cst);
    done = all_arrived();
    if (!done) futex_wait(hdr_->phase, p, std::chrono::milliseconds(20));
    hdr_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    done = done || all_arrived();
  }
  adapt_after_sleep(t0);
}

void Engine::adapt_after_sleep(Clock::time_point t0) {
  const auto waited_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  const auto max_us = static_cast<std::int64_t>(kSpinGrowth) * spin_us_;
  spin_budget_us_ = oversubscribed_ || waited_us > max_us
                        ? spin_us_
                        : static_cast<int>(std::min(max_us, std::max<std::int64_t>(spin_us_, 2 * waited_us)));
}

void Engine::check_fingerprints(const OpDesc& d) {
  const int par = static_cast<int>((calls_ - 1) & 1u);
  bool bad = false;
  for (int j = 0; j < n_ && !bad; ++j)
    bad = ctl_[j].fp[par][0].load(std::memory_order_relaxed) != d.fp0() ||
          ctl_[j].fp[par][1].load(std::memory_order_relaxed) != d.fp1() ||
          ctl_[j].fp[par][2].load(std::memory_order_relaxed) != d.seq;
  if (!bad) return;
  std::string calls;
  for (int j = 0; j < n_; ++j) {
    const auto& f = ctl_[j].fp[par];
    calls += fmt::format("; rank {}: {} #{}", granks_[j], describe_fingerprint(f[0].load(), f[1].load()), f[2].load());
  }
  throw CollError(DTRAIN_ERR_MISMATCH,
                  fmt::format("mismatched collective calls at call #{} (every rank must make the same calls with the "
                              "same count, dtype, op and root){}",
                              d.seq, calls));
}

}  // namespace dtrain::coll::shm
