// The straggler report (dtrain/agent/straggler.hpp).
#include "dtrain/agent/straggler.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace dtrain::agent::straggler {
namespace {

namespace pg = dtrain::progress;

// The ops whose ranks wait for each other; point-to-point calls (send, recv) are left out.
bool collective(std::size_t op) {
  auto o = static_cast<pg::Op>(op);
  return o != pg::Op::none && o != pg::Op::send && o != pg::Op::recv && o != pg::Op::recv_any;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A share below this (0.1% of the time) is the clocks' rounding (the collectives read a coarse
// clock, a few ms a tick), not a wait: no rank is named or listed for it, no op shown.
constexpr double kNoise = 0.001;

std::string percent(double share) { return fmt::format("{:.1f}%", share * 100); }

std::string duration_text(double s) {
  return s >= 1 ? fmt::format("{:.2f} s", s) : fmt::format("{:.1f} ms", s * 1000);
}

// "allreduce 4.81 s, 49.1 ms per call; barrier 20.0 ms, ...": the ops with a wait, largest first
std::string ops_text(const RankWait& w, double span_s) {
  std::vector<std::size_t> ops;
  for (std::size_t o = 0; o < pg::kOps; ++o)
    if (w.op_share[o] >= kNoise) ops.push_back(o);
  std::sort(ops.begin(), ops.end(), [&](auto a, auto b) { return w.op_share[a] > w.op_share[b]; });
  std::string out;
  for (auto o : ops)
    out += fmt::format("{}{} {}, {} per call", out.empty() ? "" : "; ", pg::op_name(static_cast<std::uint32_t>(o)),
                       duration_text(w.op_share[o] * span_s), duration_text(w.per_call_s[o]));
  return out;
}

}  // namespace

RankTimes totals(int rank, const pg::Snapshot& s, std::int64_t now_ns) {
  RankTimes t;
  t.rank = rank;
  if (!s.valid) return t;
  for (std::size_t o = 0; o < pg::kOps; ++o) {
    t.calls[o] = s.op_calls[o];
    t.ns[o] = s.op_ns[o];
  }
  if (s.in_call() && s.op < pg::kOps && now_ns > s.begin_ns) t.ns[s.op] += now_ns - s.begin_ns;
  return t;
}

std::optional<RankTimes> difference(const RankTimes& before, const RankTimes& after, double span_s) {
  RankTimes d;
  d.rank = after.rank;
  d.span_s = span_s;
  for (std::size_t o = 0; o < pg::kOps; ++o) {
    if (after.calls[o] < before.calls[o] || after.ns[o] < before.ns[o]) return std::nullopt;
    d.calls[o] = after.calls[o] - before.calls[o];
    d.ns[o] = after.ns[o] - before.ns[o];
  }
  return d;
}

const RankWait* Report::slowest_rank() const {
  for (const auto& w : ranks)
    if (w.rank == slowest) return &w;
  return nullptr;
}

Report report(const std::vector<RankTimes>& ranks) {
  Report out;
  std::vector<const RankTimes*> in;
  for (const auto& r : ranks)
    if (r.span_s > 0) in.push_back(&r);
  for (const auto* r : in) out.span_s = std::max(out.span_s, r->span_s);
  for (const auto* r : in) out.ranks.push_back(RankWait{r->rank});
  bool any = false;
  for (std::size_t o = 0; o < pg::kOps; ++o) {
    if (!collective(o)) continue;
    // the ranks in this op over the span, and each one's time inside it per second
    std::vector<std::size_t> in_op;
    std::vector<double> rate(in.size(), 0);
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (in[i]->calls[o] == 0 && in[i]->ns[o] == 0) continue;
      in_op.push_back(i);
      rate[i] = double(in[i]->ns[o]) / 1e9 / in[i]->span_s;
    }
    if (in_op.size() < 2) continue;
    any = true;
    for (auto i : in_op) {
      std::vector<double> others;
      for (auto j : in_op)
        if (j != i) others.push_back(rate[j]);
      double wait = std::max(0.0, median(std::move(others)) - rate[i]);
      auto& w = out.ranks[i];
      w.op_share[o] = wait;
      w.share += wait;
      if (in[i]->calls[o] > 0) w.per_call_s[o] = wait * in[i]->span_s / double(in[i]->calls[o]);
    }
  }
  if (!any) {
    out.ranks.clear();
    return out;
  }
  std::sort(out.ranks.begin(), out.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  double most = kNoise;
  for (const auto& w : out.ranks)
    if (w.share >= most) {
      most = w.share;
      out.slowest = w.rank;
    }
  return out;
}

std::string slowest_text(const Report& r) {
  const RankWait* w = r.slowest_rank();
  if (w == nullptr) return "";
  return fmt::format("rank {} kept the others waiting {} of the time ({})", w->rank, percent(w->share),
                     ops_text(*w, r.span_s));
}

std::vector<std::string> report_lines(const Report& r, const std::string& scope, std::size_t max_ranks) {
  std::vector<std::string> out;
  if (r.ranks.empty()) return out;
  if (r.slowest < 0) {
    out.push_back(fmt::format("stragglers ({}, {} ranks): none, no rank kept the others waiting", scope, r.ranks.size()));
    return out;
  }
  out.push_back(fmt::format("stragglers ({}, {} ranks): slowest {}", scope, r.ranks.size(), slowest_text(r)));
  std::vector<const RankWait*> by_wait;
  for (const auto& w : r.ranks)
    if (w.share >= kNoise) by_wait.push_back(&w);
  std::stable_sort(by_wait.begin(), by_wait.end(), [](auto a, auto b) { return a->share > b->share; });
  for (std::size_t i = 0; i < by_wait.size() && i < max_ranks; ++i)
    out.push_back(fmt::format("  rank {}: the others waited {} for it ({}): {}", by_wait[i]->rank,
                              duration_text(by_wait[i]->share * r.span_s), percent(by_wait[i]->share),
                              ops_text(*by_wait[i], r.span_s)));
  if (by_wait.size() > max_ranks)
    out.push_back(fmt::format("  ... {} more ranks with a smaller share", by_wait.size() - max_ranks));
  std::size_t none = r.ranks.size() - by_wait.size();
  if (none > 0)
    out.push_back(fmt::format("  {} rank{}: no wait for {} (under {})", none, none == 1 ? "" : "s",
                              none == 1 ? "it" : "them", percent(kNoise)));
  return out;
}

std::string encode(const Figures& f) {
  std::string out;
  for (const auto* part : {&f.window, &f.whole}) {
    out += part == &f.window ? "window\n" : "whole\n";
    for (const auto& r : *part) {
      out += fmt::format("{} {}", r.rank, r.span_s);
      for (std::size_t o = 0; o < pg::kOps; ++o)
        if (r.calls[o] != 0 || r.ns[o] != 0) out += fmt::format(" {}:{}:{}", o, r.calls[o], r.ns[o]);
      out += "\n";
    }
  }
  return out;
}

Figures decode(const std::string& text) {
  Figures f;
  std::vector<RankTimes>* part = nullptr;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line == "window" || line == "whole") {
      part = line == "window" ? &f.window : &f.whole;
      continue;
    }
    std::istringstream words(line);
    RankTimes r;
    if (part == nullptr || !(words >> r.rank >> r.span_s) || r.rank < 0 || !(r.span_s > 0)) continue;
    bool ok = true;
    for (std::string w; ok && words >> w;) {
      std::size_t o = 0;
      unsigned long long calls = 0;
      long long ns = 0;
      char c1 = 0, c2 = 0;
      std::istringstream item(w);
      ok = static_cast<bool>(item >> o >> c1 >> calls >> c2 >> ns) && c1 == ':' && c2 == ':' && o < pg::kOps && ns >= 0;
      if (ok) {
        r.calls[o] = calls;
        r.ns[o] = ns;
      }
    }
    if (ok) part->push_back(r);
  }
  return f;
}

std::vector<std::string> read_report(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "stragglers");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// ---- Tracker ---------------------------------------------------------------------------------------

std::vector<RankTimes> Tracker::between(const Sample& a, const Sample& b) {
  std::vector<RankTimes> out;
  double span_s = double(b.ns - a.ns) / 1e9;
  if (span_s <= 0) return out;
  for (const auto& after : b.totals)
    for (const auto& before : a.totals)
      if (before.rank == after.rank)
        if (auto d = difference(before, after, span_s)) out.push_back(*d);
  return out;
}

void Tracker::add(std::int64_t now_ns, std::vector<RankTimes> totals) {
  if (!samples_.empty() && now_ns <= samples_.back().ns) return;  // no time between: nothing to add
  Sample s{now_ns, std::move(totals)};
  // a page that went back (a restarted worker) starts the figures over
  if (!samples_.empty() && between(samples_.back(), s).size() != s.totals.size()) clear();
  if (!first_) first_ = s;
  samples_.push_back(std::move(s));
  auto window_ns = static_cast<std::int64_t>(window_s_ * 1e9);
  while (samples_.size() > 2 && samples_.back().ns - samples_[1].ns >= window_ns) samples_.pop_front();
}

std::vector<RankTimes> Tracker::window() const {
  if (samples_.size() < 2) return {};
  return between(samples_.front(), samples_.back());
}

std::vector<RankTimes> Tracker::whole() const {
  if (!first_ || samples_.empty()) return {};
  return between(*first_, samples_.back());
}

}  // namespace dtrain::agent::straggler
