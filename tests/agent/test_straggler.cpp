// The straggler report's computation (agent/src/straggler.cpp): the others' wait for each rank from
// the time each spent inside the collectives, and the tracker's windows over a page's totals.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dtrain/agent/straggler.hpp"

namespace st = dtrain::agent::straggler;
namespace pg = dtrain::progress;

namespace {

constexpr auto kAllreduce = static_cast<std::size_t>(pg::Op::allreduce);
constexpr auto kBarrier = static_cast<std::size_t>(pg::Op::barrier);
constexpr auto kSend = static_cast<std::size_t>(pg::Op::send);

// A rank that made `calls` allreduces over `span_s`, `inside_s` of it inside them.
st::RankTimes rank(int r, double span_s, std::uint64_t calls, double inside_s, std::size_t op = kAllreduce) {
  st::RankTimes t;
  t.rank = r;
  t.span_s = span_s;
  t.calls[op] = calls;
  t.ns[op] = static_cast<std::int64_t>(inside_s * 1e9);
  return t;
}

}  // namespace

TEST_SUITE("agent::straggler") {
  TEST_CASE("the rank that spends the least time inside is the one the others wait for, by the difference") {
    // 100 steps over 10 s; rank 2 computes 50 ms longer per step, so ranks 0, 1, 3 wait 5 s more in allreduce
    auto r = st::report({rank(0, 10, 100, 5.2), rank(1, 10, 100, 5.3), rank(2, 10, 100, 0.25), rank(3, 10, 100, 5.25)});
    REQUIRE(r.ranks.size() == 4);
    CHECK(r.slowest == 2);
    const auto* w = r.slowest_rank();
    REQUIRE(w != nullptr);
    CHECK(w->share == doctest::Approx(0.5));  // median of the others (5.25 s) - 0.25 s, over 10 s
    CHECK(w->per_call_s[kAllreduce] == doctest::Approx(0.05));
    CHECK(r.ranks[0].share == doctest::Approx(0.005));  // 5.25 - 5.2: small, but listed
    auto lines = st::report_lines(r, "the last 10 s");
    REQUIRE(lines.size() == 4);
    CHECK(lines[2].find("  rank 0: the others waited 50.0 ms for it (0.5%)") == 0);
    CHECK(lines[3] == "  2 ranks: no wait for them (under 0.1%)");
    CHECK(r.ranks[1].share == 0);                       // above the median: waited, was not waited for
    auto text = st::slowest_text(r);
    CHECK(text == "rank 2 kept the others waiting 50.0% of the time (allreduce 5.00 s, 50.0 ms per call)");
  }

  TEST_CASE("two ranks: the other one's time is the measure (a median of both would halve the wait)") {
    auto r = st::report({rank(0, 10, 200, 4.0), rank(1, 10, 200, 1.0)});
    CHECK(r.slowest == 1);
    CHECK(r.slowest_rank()->share == doctest::Approx(0.3));
    CHECK(r.ranks[0].share == 0);
  }

  TEST_CASE("spans of different lengths (nodes' own clocks) compare as time per second") {
    // rank 1's node sampled over 12 s: the same 0.5 s/s inside as rank 0 over 10 s
    auto r = st::report({rank(0, 10, 100, 5), rank(1, 12, 120, 6), rank(2, 10, 100, 1)});
    CHECK(r.slowest == 2);
    CHECK(r.slowest_rank()->share == doctest::Approx(0.4));
    CHECK(r.ranks[0].share == doctest::Approx(0).epsilon(1e-12));
    CHECK(r.span_s == 12);
  }

  TEST_CASE("ops are compared one by one and summed; point-to-point calls are left out") {
    auto a = rank(0, 10, 100, 3), b = rank(1, 10, 100, 1);
    a.calls[kBarrier] = b.calls[kBarrier] = 10;
    a.ns[kBarrier] = 1000000000;  // rank 0 waited 1 s in barriers for rank 1
    b.ns[kBarrier] = 0;
    a.calls[kSend] = b.calls[kSend] = 5;
    a.ns[kSend] = 0;
    b.ns[kSend] = 9000000000;  // rank 1 blocked in sends: not a collective wait
    auto r = st::report({a, b});
    CHECK(r.slowest == 1);
    CHECK(r.slowest_rank()->op_share[kAllreduce] == doctest::Approx(0.2));
    CHECK(r.slowest_rank()->op_share[kBarrier] == doctest::Approx(0.1));
    CHECK(r.slowest_rank()->op_share[kSend] == 0);
    CHECK(r.slowest_rank()->share == doctest::Approx(0.3));
    CHECK(r.ranks[0].share == 0);
  }

  TEST_CASE("a wait under 0.1% of the time is the clocks' rounding: no rank named for it") {
    auto r = st::report({rank(0, 10, 100, 5.004), rank(1, 10, 100, 5.0)});
    CHECK(r.ranks[1].share == doctest::Approx(0.0004));
    CHECK(r.slowest == -1);
  }

  TEST_CASE("no report from one rank, and none named when every rank spends the same time inside") {
    CHECK(st::report({rank(0, 10, 100, 5)}).ranks.empty());
    CHECK(st::report({}).ranks.empty());
    auto even = st::report({rank(0, 10, 100, 5), rank(1, 10, 100, 5), rank(2, 10, 100, 5)});
    CHECK(even.ranks.size() == 3);
    CHECK(even.slowest == -1);
    CHECK(st::slowest_text(even).empty());
    auto lines = st::report_lines(even, "the last 10 s");
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == "stragglers (the last 10 s, 3 ranks): none, no rank kept the others waiting");
  }

  TEST_CASE("report_lines: the headline, the waited-for ranks most first, the rest counted") {
    auto r = st::report({rank(0, 10, 100, 5), rank(1, 10, 100, 4), rank(2, 10, 100, 2), rank(3, 10, 100, 5)});
    auto lines = st::report_lines(r, "the whole run", 1);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0].find("stragglers (the whole run, 4 ranks): slowest rank 2 kept the others waiting 30.0%") == 0);
    CHECK(lines[1] == "  rank 2: the others waited 3.00 s for it (30.0%): allreduce 3.00 s, 30.0 ms per call");
    CHECK(lines[2] == "  ... 1 more ranks with a smaller share");
    CHECK(lines[3] == "  2 ranks: no wait for them (under 0.1%)");
  }

  TEST_CASE("a node's figures for the others: encoded, decoded as they were; junk lines skipped") {
    st::Figures f;
    f.window = {rank(3, 10.25, 100, 5.5), rank(4, 10.25, 0, 0)};
    auto b = rank(3, 60.5, 600, 30);
    b.calls[kBarrier] = 7;
    b.ns[kBarrier] = 123;
    f.whole = {b};
    auto text = st::encode(f);
    auto back = st::decode(text + "junk\n5 x\n6 1.5 99:1:1\n7 -1\n");
    REQUIRE(back.window.size() == 2);
    REQUIRE(back.whole.size() == 1);
    CHECK(back.window[0].rank == 3);
    CHECK(back.window[0].span_s == 10.25);
    CHECK(back.window[0].calls[kAllreduce] == 100);
    CHECK(back.window[0].ns[kAllreduce] == 5500000000);
    CHECK(back.window[1].rank == 4);
    CHECK(back.whole[0].ns[kBarrier] == 123);
    CHECK(back.whole[0].calls[kBarrier] == 7);
    CHECK(st::decode("").window.empty());
    CHECK(st::decode("3 10 2:1:1\n").window.empty());  // a rank line before any part
  }

  TEST_CASE("totals: a call in progress counts up to now; an empty page counts nothing") {
    pg::Snapshot s;
    s.valid = true;
    s.calls = 3;
    s.op = kAllreduce;
    s.begin_ns = 1000;
    s.end_ns = 0;  // inside
    s.op_calls[kAllreduce] = 2;
    s.op_ns[kAllreduce] = 500;
    auto t = st::totals(7, s, 1600);
    CHECK(t.rank == 7);
    CHECK(t.calls[kAllreduce] == 2);
    CHECK(t.ns[kAllreduce] == 1100);
    s.end_ns = 1400;  // returned
    CHECK(st::totals(7, s, 1600).ns[kAllreduce] == 500);
    CHECK(st::totals(7, pg::Snapshot{}, 1600).ns[kAllreduce] == 0);
  }

  TEST_CASE("the page's writer accumulates each call's time inside, per op") {
    alignas(64) static pg::Page page{};
    pg::begin_call(page, pg::Op::allreduce, 1, 64, 1000);
    pg::end_call(page, 1300);
    pg::begin_call(page, pg::Op::allreduce, 2, 64, 2000);
    pg::end_call(page, 2100);
    pg::begin_call(page, pg::Op::barrier, 1, 0, 3000);
    pg::end_call(page, 3050);
    page.version.store(pg::kVersion);
    page.magic.store(pg::kMagic);
    auto s = pg::read(page);
    REQUIRE(s.valid);
    CHECK(s.op_calls[kAllreduce] == 2);
    CHECK(s.op_ns[kAllreduce] == 400);
    CHECK(s.op_calls[kBarrier] == 1);
    CHECK(s.op_ns[kBarrier] == 50);
    page.version.store(1);  // a version 1 writer: read without the accumulators
    auto old = pg::read(page);
    CHECK(old.valid);
    CHECK(old.op_ns[kAllreduce] == 0);
    page.version.store(pg::kVersion + 1);  // a layout this reader does not know
    CHECK_FALSE(pg::read(page).valid);
  }

  TEST_CASE("the tracker: a window of the last samples, the whole since the first, a reset page starts over") {
    st::Tracker t(10);
    auto at = [](double inside0, double inside1, std::uint64_t calls) {
      return std::vector<st::RankTimes>{rank(0, 0, calls, inside0), rank(1, 0, calls, inside1)};
    };
    constexpr std::int64_t kS = 1000000000;
    CHECK(t.window().empty());
    for (int s = 0; s <= 20; ++s) {
      // rank 1 is late for the first 10 s only
      double late = s <= 10 ? 0.4 * s : 4;
      t.add(s * kS, at(0.5 * s, 0.5 * s - late, 10 * s));
    }
    auto whole = st::report(t.whole());
    CHECK(whole.span_s == doctest::Approx(20));
    CHECK(whole.slowest == 1);
    CHECK(whole.slowest_rank()->share == doctest::Approx(0.2));
    auto window = st::report(t.window());
    CHECK(window.span_s == doctest::Approx(10));
    CHECK(window.slowest == -1);  // over the last 10 s nobody was late
    t.add(21 * kS, at(0.1, 0.1, 1));  // the workers restarted: their pages went back
    CHECK(t.whole().empty());
    t.add(22 * kS, at(0.6, 0.2, 11));
    CHECK(st::report(t.whole()).slowest == 1);
  }
}
