#pragma once
// The straggler report: how long the other ranks waited for each rank in the collectives, from the
// time each rank spent inside them (progress pages, version 2: per op, calls and total ns).
//
// Clocks differ across hosts, so no timestamps are compared across ranks, only durations. In a
// synchronous job every rank leaves a collective at about the same moment, so a rank that arrives
// late spends less time inside it than the others, by as much as they waited for it. Over a span,
// per op, with W_j the time rank j spent inside that op per second of its span:
//   the others' wait for rank r = max(0, median over the other ranks j of W_j - W_r)
// and a rank's share is the sum over the collective ops (point-to-point calls are left out: their
// peers need not wait together). The median over the others keeps one slow rank from making the
// fast ones look late. Ranks of one run whose subgroups call different collectives are compared
// only op by op, which can mislead when subgroups differ in work (a limit of a report from durations).
// tests/agent/test_straggler.cpp.
#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/common/progress_page.hpp"

namespace dtrain::agent::straggler {

// One rank's time inside the collectives, per op: totals since its page began, or the difference
// over a span of its node's clock (span_s).
struct RankTimes {
  int rank = -1;
  double span_s = 0;
  std::array<std::uint64_t, progress::kOps> calls{};
  std::array<std::int64_t, progress::kOps> ns{};
};

// A page's totals at `now_ns` (the pages' clock): a call in progress counts up to now.
RankTimes totals(int rank, const progress::Snapshot& s, std::int64_t now_ns);
// From `before` to `after`, `span_s` apart; nullopt when a figure went down (the page was reset).
std::optional<RankTimes> difference(const RankTimes& before, const RankTimes& after, double span_s);

// One rank in a report: the others' wait for it as a share of the span (0.25: a quarter of the
// time), in all and by op, and by op the wait per call.
struct RankWait {
  int rank = -1;
  double share = 0;
  std::array<double, progress::kOps> op_share{};
  std::array<double, progress::kOps> per_call_s{};
};

struct Report {
  double span_s = 0;            // the longest span of its ranks
  std::vector<RankWait> ranks;  // in rank order; empty when fewer than two ranks made collective calls
  int slowest = -1;             // the rank the others waited for the most (a share above 0); -1 none
  const RankWait* slowest_rank() const;
};

// The report over `ranks` (differences over spans, possibly from different nodes' clocks).
Report report(const std::vector<RankTimes>& ranks);

// "rank 3 kept the others waiting 48.2% of the time (allreduce: 49.1 ms per call)", or "" without a slowest.
std::string slowest_text(const Report& r);
// The report as lines: a headline naming the slowest rank (`scope` says over what: "the last 10 s",
// "the whole run"), then the ranks the others waited for, most first (at most `max_ranks`).
std::vector<std::string> report_lines(const Report& r, const std::string& scope, std::size_t max_ranks = 8);

// A node's figures for the other nodes (through the rendezvous): its ranks' differences over the
// last window and over the whole run, as text ("window"/"whole" lines, then one line per rank:
// "RANK SPAN_S OP:CALLS:NS ..."). decode() skips what it cannot read.
struct Figures {
  std::vector<RankTimes> window, whole;
};
std::string encode(const Figures& f);
Figures decode(const std::string& text);

// The report a run's agent last wrote in its run folder (<run_dir>/stragglers, once a second while
// the workers run): what `dtrain status` shows; empty when there is none.
std::vector<std::string> read_report(const std::filesystem::path& run_dir);

// The figures of a node's ranks over time: each sample is the pages' totals at a moment; window()
// reports over the last `window_s`, whole() since the first sample (a reset page starts over).
class Tracker {
 public:
  explicit Tracker(double window_s = 10) : window_s_(window_s) {}
  void add(std::int64_t now_ns, std::vector<RankTimes> totals);
  void clear() { samples_.clear(); first_.reset(); }
  // Each rank's difference over the window (or since the first sample): what report() takes.
  std::vector<RankTimes> window() const;
  std::vector<RankTimes> whole() const;
  double window_s() const { return window_s_; }

 private:
  struct Sample {
    std::int64_t ns = 0;
    std::vector<RankTimes> totals;
  };
  static std::vector<RankTimes> between(const Sample& a, const Sample& b);
  double window_s_;
  std::deque<Sample> samples_;  // the last window's, oldest first
  std::optional<Sample> first_;
};

}  // namespace dtrain::agent::straggler
