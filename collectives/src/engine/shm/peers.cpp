// The local ranks as the segment shows them (peers.hpp).
#include "peers.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace dtrain::coll::shm {

Peers::Peers(Segment& segment, std::vector<int> global_ranks)
    : seg_(segment), me_(segment.local_rank()), n_(segment.local_size()), granks_(std::move(global_ranks)) {}

void Peers::begin(const OpDesc& d) {
  auto& c = seg_.ctl(me_);
  const int par = static_cast<int>(calls_++ & 1u);
  c.fp[par][0].store(d.fp0(), std::memory_order_relaxed);
  c.fp[par][1].store(d.fp1(), std::memory_order_relaxed);
  c.fp[par][2].store(d.seq, std::memory_order_release);  // after fp0, fp1 (check_peer_calls)
  c.kind.store(static_cast<std::uint32_t>(d.kind), std::memory_order_relaxed);
  c.seq.store(d.seq, std::memory_order_relaxed);
  c.busy.store(1, std::memory_order_release);
}

void Peers::end() { seg_.ctl(me_).busy.store(0, std::memory_order_release); }

bool Peers::same_call(int j, const OpDesc& d) const {
  const auto& f = seg_.ctl(j).fp[(calls_ - 1) & 1u];
  return f[2].load(std::memory_order_acquire) == d.seq && f[0].load(std::memory_order_relaxed) == d.fp0() &&
         f[1].load(std::memory_order_relaxed) == d.fp1();
}

std::string Peers::calls_text(int par) const {
  std::string calls;
  for (int j = 0; j < n_; ++j) {
    const auto& f = seg_.ctl(j).fp[par];
    calls += fmt::format("; rank {}: {} #{}", world(j), describe_fingerprint(f[0].load(), f[1].load()), f[2].load());
  }
  return calls;
}

void Peers::check_fingerprints(const OpDesc& d) const {
  bool bad = false;
  for (int j = 0; j < n_ && !bad; ++j) bad = !same_call(j, d);
  if (!bad) return;
  throw CollError(DTRAIN_ERR_MISMATCH,
                  fmt::format("mismatched collective calls at call #{} (every rank must make the same calls with the "
                              "same count, dtype, op and root){}",
                              d.seq, calls_text(static_cast<int>((calls_ - 1) & 1u))));
}

void Peers::check_peer_calls(const OpDesc& d, const std::function<bool()>& ready) const {
  const int par = static_cast<int>((calls_ - 1) & 1u);
  for (int j = 0; j < n_; ++j) {
    if (j == me_ || seg_.ctl(j).fp[par][2].load(std::memory_order_acquire) != d.seq || same_call(j, d)) continue;
    if (ready()) return;
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched collective calls at call #{} (every rank must make the same calls with "
                                "the same count, dtype, op and root){}",
                                d.seq, calls_text(par)));
  }
}

std::string Peers::gone(int j) const {
  if (j == me_) return "";
  if (seg_.ctl(j).state.load() == 1) return "destroyed its communicator";
  if (!seg_.alive(j)) return fmt::format("(pid {}) died", seg_.ctl(j).pid.load());
  return "";
}

void Peers::check_alive(const OpDesc& d, int j, const std::function<bool()>& arrived) const {
  const std::string what = gone(j);
  if (what.empty() || arrived()) return;
  const auto& c = seg_.ctl(j);
  const auto kind = op_kind_name(static_cast<OpKind>(c.kind.load()));
  if (c.state.load() == 1)
    throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} destroyed its communicator instead of "
                                                 "joining (it had reached {} #{})",
                                                 d.text(), world(me_), world(j), kind, c.seq.load()));
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} {}; it had reached {} #{}", d.text(),
                                               world(me_), world(j), what, kind, c.seq.load()));
}

void Peers::abort(dtrain_status_t status, const std::string& msg) noexcept {
  auto& h = seg_.header();
  std::int32_t expected = -1;
  if (h.abort_rank.compare_exchange_strong(expected, me_)) {
    const std::size_t m = std::min(msg.size(), sizeof(h.abort_msg) - 1);
    std::memcpy(h.abort_msg, msg.data(), m);
    h.abort_msg[m] = '\0';
    h.abort_status.store(static_cast<std::uint32_t>(status));
    h.abort_ready.store(1, std::memory_order_release);
  }
  // Wake sleepers (in collectives and point-to-point calls); they see the record on their next check.
  seg_.wake_collectives();
  for (int j = 0; j < n_; ++j)
    if (j != me_) seg_.ring_bell(j);
}

bool Peers::aborted() const { return seg_.header().abort_ready.load(std::memory_order_acquire) != 0; }

void Peers::throw_abort(const std::string& call) const {
  const auto& h = seg_.header();
  const int who = h.abort_rank.load();
  auto st = static_cast<dtrain_status_t>(h.abort_status.load());
  if (st == DTRAIN_SUCCESS) st = DTRAIN_ERR_PEER;
  throw CollError(st, fmt::format("{} on rank {}: rank {} failed: {}", call, world(me_), world(who), h.abort_msg));
}

void Peers::throw_given_up(const std::string& call) const {
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (!aborted() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (aborted()) throw_abort(call);
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: a peer gave up on this call before this rank reached "
                                               "it, and recorded no reason",
                                               call, world(me_)));
}

void Peers::check_or_give_up(const std::function<void()>& checks, const std::function<bool()>& give_up) {
  try {
    checks();
  } catch (const CollError& e) {
    if (!give_up()) return;
    abort(e.status(), e.what());
    throw;
  }
}

void Peers::fail_timeout(const OpDesc& d, const std::function<bool(int)>& arrived_at) const {
  std::string missing, where;
  for (int j = 0; j < n_; ++j) {
    const auto& c = seg_.ctl(j);
    const bool arrived = arrived_at(j);
    if (!arrived) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", world(j));
    where += fmt::format("; rank {}: {} {} #{}{}", world(j), c.busy.load() ? "in" : "last finished",
                         op_kind_name(static_cast<OpKind>(c.kind.load())), c.seq.load(),
                         arrived ? "" : " (not arrived)");
  }
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}: ranks [{}] never arrived{}",
                                                  d.text(), seconds_text(d.timeout()), world(me_), missing, where));
}

std::string Peers::state_of(int j) const {
  const auto& c = seg_.ctl(j);
  if (c.p2p_busy.load() != 0) {
    const int to = c.p2p_to.load(), from = c.p2p_from.load();
    std::string s = "in ";
    if (to >= 0) s += fmt::format("send #{} to rank {}", c.p2p_sseq.load(), world(to));
    if (from >= 0)
      s += fmt::format("{}recv #{} from rank {}", to >= 0 ? " with " : "", c.p2p_rseq.load(), world(from));
    return s;
  }
  const auto kind = static_cast<OpKind>(c.kind.load());
  if (c.busy.load() != 0) return fmt::format("in {} #{}", op_kind_name(kind), c.seq.load());
  return "not in a call of this communicator";
}

void Peers::leave() noexcept {
  seg_.ctl(me_).state.store(1, std::memory_order_seq_cst);
  seg_.wake_collectives();
  for (int j = 0; j < n_; ++j)
    if (j != me_) seg_.ring_bell(j);  // a peer waiting for a message from this rank learns it left
}

}  // namespace dtrain::coll::shm
