// Hang diagnosis (hang.hpp).
#include "dtrain/agent/hang.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace dtrain::agent {
namespace {

double seconds(std::int64_t ns) { return double(ns) / 1e9; }

std::string call_text(const progress::Snapshot& s) {
  return fmt::format("{} #{} ({})", progress::op_name(s.op), s.seq, bytes_text(s.bytes));
}

bool seen(const RankProgress& r) { return r.page.valid && r.page.calls > 0; }

// "rank 3 (pid 812, state T stopped)"; the state only when it is known, the pid only with it
std::string who(const RankProgress& r) {
  if (r.state == 0) return fmt::format("rank {}", r.rank);
  return fmt::format("rank {} (pid {}, state {})", r.rank, r.pid, state_text(r.state));
}

std::string rank_line(const RankProgress& r, std::int64_t now) {
  const auto& s = r.page;
  // the state where it is news: stopped, in the kernel, a zombie
  std::string name = std::string("TtDZ").find(r.state) != std::string::npos && r.state != 0 ? who(r)
                                                                                            : fmt::format("rank {}", r.rank);
  if (!seen(r)) return fmt::format("{}: unseen (no dtrain collective call yet)", name);
  if (s.in_call()) return fmt::format("{}: in {} for {:.1f} s", name, call_text(s), seconds(now - s.begin_ns));
  return fmt::format("{}: last collective {} returned {:.1f} s ago", name, call_text(s), seconds(now - s.end_ns));
}

// Where the culprit is, against the call the others wait in (`waited`: null when none waits):
// "never reached allreduce #95; rank 2 waits in it".
std::string blame_text(const RankProgress& c, const progress::Snapshot* waited, const std::vector<int>& waiters,
                       std::int64_t now) {
  const auto& s = c.page;
  std::string where;
  if (waited == nullptr) {
    if (!seen(c)) return "made no progress, and no dtrain collective call";
    if (s.in_call()) return fmt::format("made no progress in {} for {:.1f} s", call_text(s), seconds(now - s.begin_ns));
    return fmt::format("made no progress since its last collective, {}, returned {:.1f} s ago", call_text(s),
                       seconds(now - s.end_ns));
  }
  std::string call = fmt::format("{} #{}", progress::op_name(waited->op), waited->seq);
  if (!seen(c)) where = fmt::format("never reached {} (it made no dtrain collective call)", call);
  else if (s.in_call() && s.seq == waited->seq && s.op == waited->op) where = fmt::format("is in {} too, making no progress", call);
  else if (s.in_call()) where = fmt::format("never reached {}: it is still in {}, which the others left", call, call_text(s));
  else where = fmt::format("never reached {} (its last collective, {}, returned {:.1f} s ago)", call, call_text(s),
                           seconds(now - s.end_ns));
  if (waiters.empty()) return where;
  return fmt::format("{}; rank{} {} wait{} in it", where, waiters.size() == 1 ? "" : "s", ranks_text(waiters),
                     waiters.size() == 1 ? "s" : "");
}

}  // namespace

char process_state(long pid) {
  if (pid <= 0) return 0;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(in, stat);
  auto close = stat.rfind(')');  // the command name may hold anything, ')' included
  return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

std::string state_text(char state) {
  const char* name = "unknown";
  switch (state) {
    case 'R': name = "running"; break;
    case 'S': name = "sleeping"; break;
    case 'D': name = "in an uninterruptible wait"; break;
    case 'T': name = "stopped"; break;
    case 't': name = "stopped by a debugger"; break;
    case 'Z': name = "zombie"; break;
    case 'X': name = "dead"; break;
    case 'I': name = "idle"; break;
    default: break;
  }
  return fmt::format("{} {}", state, name);
}

std::string bytes_text(std::uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (1ULL << 20)) return fmt::format("{:.1f} KiB", double(b) / 1024);
  if (b < (1ULL << 30)) return fmt::format("{:.1f} MiB", double(b) / double(1ULL << 20));
  return fmt::format("{:.1f} GiB", double(b) / double(1ULL << 30));
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += out.empty() ? "" : ", ";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string unseen_text(const Diagnosis& d) {
  if (d.unseen.empty()) return "";
  bool one = d.unseen.size() == 1;
  return fmt::format("rank{} {}: no collective call on {} progress page{} yet (calls of dtrain's collectives and of "
                     "torch.distributed in Python show there; other traffic does not): `dtrain status --stacks` "
                     "shows where {}",
                     one ? "" : "s", ranks_text(d.unseen), one ? "its" : "their", one ? "" : "s",
                     one ? "it is" : "they are");
}

std::string diagnosis_text(const Diagnosis& d) {
  std::string out;
  for (const auto& l : d.lines) out += (out.empty() ? "" : "\n") + l;
  if (!d.unseen.empty()) out += "\n" + unseen_text(d);
  if (d.hung) out += "\nstuck: " + d.verdict;
  return out;
}

Diagnosis diagnose(const std::vector<RankProgress>& ranks, std::int64_t now, double threshold_s) {
  Diagnosis d;
  const auto threshold_ns = static_cast<std::int64_t>(threshold_s * 1e9);
  const auto stopped_ns = static_cast<std::int64_t>(kStoppedAfterS * 1e9);
  // the waits that passed the threshold, by call (op, seq)
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<int>> stuck;
  std::int64_t longest = 0;
  const progress::Snapshot* waited = nullptr;  // the longest wait of all
  const RankProgress* stopped = nullptr;       // the first rank stopped long enough
  for (const auto& r : ranks) {
    d.lines.push_back(rank_line(r, now));
    if (!seen(r)) d.unseen.push_back(r.rank);
    if (!stopped && r.state == 'T' && r.stopped_since_ns > 0 && now - r.stopped_since_ns >= stopped_ns) stopped = &r;
    if (!r.page.in_call()) continue;
    if (now - r.page.begin_ns >= longest) longest = now - r.page.begin_ns, waited = &r.page;
    if (now - r.page.begin_ns >= threshold_ns) stuck[{r.page.op, r.page.seq}].push_back(r.rank);
  }
  d.waited_s = seconds(longest);
  const RankProgress* culprit = stopped;
  if (stopped && waited == &stopped->page) {  // a stopped rank in a call: the others' wait is what counts
    waited = nullptr;
    for (const auto& r : ranks)
      if (&r != stopped && r.page.in_call() && (waited == nullptr || r.page.begin_ns < waited->begin_ns)) waited = &r.page;
  }
  if (!stuck.empty()) {
    d.hung = true;
    std::string parts;
    for (auto& [call, who_] : stuck) {
      std::sort(who_.begin(), who_.end());
      const auto* any = &std::find_if(ranks.begin(), ranks.end(), [&](const RankProgress& r) { return r.rank == who_[0]; })->page;
      parts += fmt::format("{}rank{} {} wait{} in {}", parts.empty() ? "" : "; ", who_.size() == 1 ? "" : "s",
                           ranks_text(who_), who_.size() == 1 ? "s" : "", call_text(*any));
    }
    // ranks that did not reach the call the longest waiters are in: they stopped calling; the one
    // furthest behind (no call at all counts as furthest) is the one the others wait for
    std::vector<std::string> behind;
    for (const auto& r : ranks) {
      if (waited == nullptr || (r.page.in_call() && r.page.seq >= waited->seq)) continue;
      bool before = seen(r) && r.page.seq < waited->seq;
      if (!seen(r) || before) {
        auto key = [](const RankProgress& x) { return seen(x) ? x.page.seq : 0; };
        if (culprit == nullptr || (culprit != stopped && key(r) < key(*culprit))) culprit = &r;
      }
      if (r.page.in_call()) continue;
      if (!seen(r))
        behind.push_back(fmt::format("rank {} made no collective call (its Python stack shows where it is)", r.rank));
      else if (before)
        behind.push_back(fmt::format("rank {} stopped calling: its last collective, {}, returned {:.1f} s ago", r.rank,
                                     call_text(r.page), seconds(now - r.page.end_ns)));
    }
    d.verdict = fmt::format("no progress for {:.0f} s: {}", seconds(longest), parts);
    for (const auto& b : behind) d.verdict += "; " + b;
  }
  if (culprit == nullptr) return d;
  d.culprit = culprit->rank;
  std::vector<int> waiters;
  for (const auto& r : ranks)
    if (waited && &r != culprit && r.page.in_call() && r.page.op == waited->op && r.page.seq == waited->seq)
      waiters.push_back(r.rank);
  d.blame = blame_text(*culprit, waited, waiters, now);
  if (culprit == stopped) {
    d.stopped = d.hung = true;
    d.verdict = fmt::format("{} {} (stopped for {:.0f} s)", who(*culprit), d.blame, seconds(now - culprit->stopped_since_ns));
  }
  return d;
}

}  // namespace dtrain::agent
