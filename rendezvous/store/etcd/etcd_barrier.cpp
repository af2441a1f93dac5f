// EtcdStore::barrier: the built-in store's reusable barrier (server/store_barrier.hpp) on two etcd
// keys per barrier, "round" and "arrived" (etcd_store.hpp describes the protocol).
#include <algorithm>
#include <charconv>

#include "dtrain/common/errors.hpp"
#include "etcd_store.hpp"
#include "dtrain/rendezvous/store/kv_table.hpp"
#include "dtrain/rendezvous/store/store_barrier.hpp"

namespace dtrain::etcd {

using Clock = std::chrono::steady_clock;

namespace {

struct BarrierState {
  std::int64_t round = 0, round_mod = 0;                  // completed rounds, mod revision of "round"
  std::int64_t arrived = 0, count = 0, arrived_mod = 0;  // callers in this round, their count
};

std::string round_key(const std::string& base) { return base + "round"; }
std::string arrived_key(const std::string& base) { return base + "arrived"; }

// Parses "N" or "N COUNT" (a value this file wrote); IoError for anything else.
void parse_numbers(const std::string& key, const std::string& text, std::int64_t& a, std::int64_t* b) {
  const char* p = text.data();
  const char* end = p + text.size();
  auto r = std::from_chars(p, end, a);
  bool ok = r.ec == std::errc{};
  if (ok && b != nullptr) ok = r.ptr != end && *r.ptr == ' ' && (r = std::from_chars(r.ptr + 1, end, *b)).ec == std::errc{};
  if (!ok || r.ptr != end) throw IoError(fmt::format("etcd key '{}' holds '{}', not a barrier's state", key, text));
}

// The state in the results of the two reads (round, arrived) that every barrier step ends with.
BarrierState state_of(const std::string& base, const std::vector<RangeResult>& ranges) {
  BarrierState s;
  if (ranges.size() == 2 && !ranges[0].kvs.empty()) {
    parse_numbers(round_key(base), ranges[0].kvs[0].value, s.round, nullptr);
    s.round_mod = ranges[0].kvs[0].mod_revision;
  }
  if (ranges.size() == 2 && !ranges[1].kvs.empty()) {
    parse_numbers(arrived_key(base), ranges[1].kvs[0].value, s.arrived, &s.count);
    s.arrived_mod = ranges[1].kvs[0].mod_revision;
  }
  return s;
}

std::vector<Op> reads(const std::string& base) { return {Op::range(round_key(base)), Op::range(arrived_key(base))}; }

// Succeeds when neither key changed since s was read.
std::vector<Compare> unchanged(const std::string& base, const BarrierState& s) {
  return {Compare{round_key(base), Compare::Target::mod, Compare::Result::equal, s.round_mod, {}},
          Compare{arrived_key(base), Compare::Target::mod, Compare::Result::equal, s.arrived_mod, {}}};
}

// The arrivals of this round with one more (or one fewer) caller.
Op arrivals(const std::string& base, std::int64_t n, std::int64_t count) {
  return n <= 0 ? Op::erase(arrived_key(base)) : Op::put(arrived_key(base), fmt::format("{} {}", n, count));
}

BarrierState read_state(Client& c, const std::string& base) { return state_of(base, c.txn({}, reads(base)).ranges); }

// Waits for the round to complete; when the timeout passes, takes our arrival back and throws.
void wait_round(Client& c, const std::string& where, const std::string& name, const std::string& base, int count,
                std::int64_t round, std::int64_t since, rdzv::milliseconds timeout) {
  timeout = std::max(timeout, rdzv::milliseconds(0));
  auto deadline = Clock::now() + timeout;
  {
    Watch w(c, round_key(base), {}, since + 1);
    for (;;) {
      auto left = std::chrono::duration_cast<rdzv::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      for (const auto& ev : w.next(left))
        if (ev.type == WatchEvent::Type::put) return;  // "round" only changes when a round completes
    }
  }
  auto s = read_state(c, base);
  for (;;) {
    if (s.round != round) return;  // it completed just as we gave up: released after all
    auto text = fmt::format("barrier '{}': {} of {} arrived after {} ms", name, s.arrived, count, timeout.count());
    auto t = c.txn(unchanged(base, s), {arrivals(base, s.arrived - 1, s.count)}, reads(base));
    if (t.succeeded) throw TimeoutError(fmt::format("{}: {}", where, text));
    s = state_of(base, t.ranges);
  }
}

}  // namespace

void EtcdStore::barrier(std::string_view name, int count, rdzv::milliseconds timeout) {
  auto base = full_key("barrier", name);
  base.insert(prefix_.size(), "__barrier/");
  base += '/';
  std::string n(name);
  if (count < 1 || count > rdzv::kMaxBarrierCount)
    throw IoError(fmt::format("{}: barrier '{}': count {} out of range", where("barrier"), n, count));
  auto s = read_state(*client_, base);
  for (;;) {
    if (s.arrived > 0 && s.count != count)
      throw IoError(fmt::format("{}: barrier '{}': this caller expects {} but others expect {}", where("barrier"), n,
                                count, s.count));
    bool last = s.arrived + 1 >= count;
    std::vector<Op> enter{arrivals(base, s.arrived + 1, count)};
    if (last) enter = {Op::put(round_key(base), std::to_string(s.round + 1)), Op::erase(arrived_key(base))};
    auto t = client_->txn(unchanged(base, s), enter, reads(base));
    if (t.succeeded) {
      if (!last) wait_round(*client_, where("barrier"), n, base, count, s.round, t.revision, timeout);
      return;
    }
    s = state_of(base, t.ranges);  // another caller got in first: again, on what it left
  }
}

}  // namespace dtrain::etcd
