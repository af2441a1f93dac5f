// Hang diagnosis (hang.hpp).
#include "dtrain/agent/hang.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace dtrain::agent {
namespace {

double seconds(std::int64_t ns) { return double(ns) / 1e9; }

std::string call_text(const progress::Snapshot& s) {
  return fmt::format("{} #{} ({})", progress::op_name(s.op), s.seq, bytes_text(s.bytes));
}

std::string rank_line(const RankProgress& r, std::int64_t now) {
  const auto& s = r.page;
  if (!s.valid || s.calls == 0) return fmt::format("rank {}: unseen (no dtrain collective call yet)", r.rank);
  if (s.in_call()) return fmt::format("rank {}: in {} for {:.1f} s", r.rank, call_text(s), seconds(now - s.begin_ns));
  return fmt::format("rank {}: last collective {} returned {:.1f} s ago", r.rank, call_text(s), seconds(now - s.end_ns));
}

}  // namespace

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
  return fmt::format("rank{} {}: dtrain cannot see into {}: no dtrain collective call yet (gloo, NCCL or other "
                     "traffic is invisible to it), so busy, idle or stuck, it cannot tell",
                     one ? "" : "s", ranks_text(d.unseen), one ? "it" : "them");
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
  // the waits that passed the threshold, by call (op, seq)
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<int>> stuck;
  std::int64_t longest = 0;
  const progress::Snapshot* waited = nullptr;
  for (const auto& r : ranks) {
    d.lines.push_back(rank_line(r, now));
    if (!r.page.valid || r.page.calls == 0) d.unseen.push_back(r.rank);
    if (!r.page.in_call() || now - r.page.begin_ns < threshold_ns) continue;
    stuck[{r.page.op, r.page.seq}].push_back(r.rank);
    if (now - r.page.begin_ns > longest) longest = now - r.page.begin_ns, waited = &r.page;
  }
  if (stuck.empty()) return d;
  d.hung = true;
  std::string parts;
  for (auto& [call, who] : stuck) {
    std::sort(who.begin(), who.end());
    const auto* any = &std::find_if(ranks.begin(), ranks.end(), [&](const RankProgress& r) { return r.rank == who[0]; })->page;
    parts += fmt::format("{}rank{} {} wait{} in {}", parts.empty() ? "" : "; ", who.size() == 1 ? "" : "s",
                         ranks_text(who), who.size() == 1 ? "s" : "", call_text(*any));
  }
  // ranks that did not reach the call the longest waiters are in: they stopped calling
  std::vector<std::string> behind;
  for (const auto& r : ranks) {
    if (r.page.in_call()) continue;
    if (!r.page.valid || r.page.calls == 0)
      behind.push_back(fmt::format("rank {} made no dtrain collective call (dtrain cannot see where it is)", r.rank));
    else if (r.page.seq < waited->seq)
      behind.push_back(fmt::format("rank {} stopped calling: its last collective, {}, returned {:.1f} s ago", r.rank,
                                   call_text(r.page), seconds(now - r.page.end_ns)));
  }
  d.verdict = fmt::format("no progress for {:.0f} s: {}", seconds(longest), parts);
  for (const auto& b : behind) d.verdict += "; " + b;
  return d;
}

}  // namespace dtrain::agent
