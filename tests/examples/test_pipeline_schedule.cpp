// The pipeline example's schedules (examples/pipeline/schedule.cpp), without processes: the compute
// orders of GPipe and 1F1B, their actions run against each other with blocking sends that wait for
// their receiver (the strictest engine: no deadlock, every message matched in order), and the idle
// fraction of a unit-time timeline, which must equal (p-1)/(m+p-1).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedule.hpp"

namespace {

using namespace pipeline;

// One half of an action: a send or a receive of (kind, micro) between `from` and `to`.
struct Half {
  bool send;
  bool act;  // an activation (forward) or a gradient (backward)
  int micro, from, to;
  bool done = false;
};

std::vector<Half> halves(const Action& a, int s) {
  switch (a.op) {
    case Op::forward:
    case Op::backward: return {};
    case Op::recv_act: return {{false, true, a.micro, s - 1, s}};
    case Op::send_act: return {{true, true, a.micro, s, s + 1}};
    case Op::recv_grad: return {{false, false, a.micro, s + 1, s}};
    case Op::send_grad: return {{true, false, a.micro, s, s - 1}};
    case Op::send_act_recv_grad: return {{true, true, a.micro, s, s + 1}, {false, false, a.other, s + 1, s}};
    case Op::send_grad_recv_act: return {{true, false, a.micro, s, s - 1}, {false, true, a.other, s - 1, s}};
  }
  return {};
}

// Runs every stage's actions with rendezvous sends. Throws on a mismatched pair or a deadlock; also
// checks that each stage computes F(u) before B(u) and that it has the data for each.
void simulate(Schedule sched, int p, int m) {
  std::vector<std::vector<Action>> prog(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) prog[static_cast<std::size_t>(s)] = actions(steps(sched, s, p, m), s, p);
  std::vector<std::size_t> pc(static_cast<std::size_t>(p), 0);
  std::vector<std::vector<Half>> cur(static_cast<std::size_t>(p));
  std::vector<std::vector<int>> have_act(p, std::vector<int>(m, 0)), have_grad(p, std::vector<int>(m, 0)),
      fwd(p, std::vector<int>(m, 0));
  auto load = [&](int s) {
    auto& pcs = pc[static_cast<std::size_t>(s)];
    const auto& pr = prog[static_cast<std::size_t>(s)];
    while (pcs < pr.size()) {  // compute runs at once; stop at the first action with messages
      const Action& a = pr[pcs];
      if (a.op == Op::forward) {
        if (s > 0 && !have_act[s][a.micro]) throw std::logic_error("forward without its input");
        fwd[s][a.micro] = 1;
      } else if (a.op == Op::backward) {
        if (!fwd[s][a.micro] || (s < p - 1 && !have_grad[s][a.micro])) throw std::logic_error("backward too early");
        fwd[s][a.micro] = 2;
      } else {
        cur[static_cast<std::size_t>(s)] = halves(a, s);
        return;
      }
      ++pcs;
    }
  };
  for (int s = 0; s < p; ++s) load(s);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s)
      for (Half& h : cur[static_cast<std::size_t>(s)]) {
        if (!h.send || h.done) continue;
        for (Half& r : cur[static_cast<std::size_t>(h.to)]) {
          if (r.send || r.done || r.from != s) continue;
          if (r.act != h.act || r.micro != h.micro) throw std::logic_error("mismatched send and receive");
          h.done = r.done = true;
          (r.act ? have_act : have_grad)[h.to][r.micro] = 1;
          progress = true;
        }
      }
    for (int s = 0; s < p; ++s) {
      auto& c = cur[static_cast<std::size_t>(s)];
      if (c.empty() || !std::all_of(c.begin(), c.end(), [](const Half& h) { return h.done; })) continue;
      c.clear();
      ++pc[static_cast<std::size_t>(s)];
      load(s);
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s) {
    if (pc[static_cast<std::size_t>(s)] != prog[static_cast<std::size_t>(s)].size())
      throw std::logic_error("deadlock at stage " + std::to_string(s));
    for (int u = 0; u < m; ++u)
      if (fwd[s][u] != 2) throw std::logic_error("a micro-batch was not run forward and backward");
  }
}

// Unit-time timeline: F(s,u) after F(s-1,u); B(s,u) after B(s+1,u); one op at a time per stage in
// its order. Returns the idle fraction of the stages until the last one finishes.
double simulated_bubble(Schedule sched, int p, int m) {
  std::vector<std::vector<int>> fend(p, std::vector<int>(m, -1)), bend(p, std::vector<int>(m, -1));
  std::vector<std::vector<Step>> order(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) order[static_cast<std::size_t>(s)] = steps(sched, s, p, m);
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<int> free_at(static_cast<std::size_t>(p), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      auto& i = next[static_cast<std::size_t>(s)];
      if (i == order[static_cast<std::size_t>(s)].size()) continue;
      const Step st = order[static_cast<std::size_t>(s)][i];
      const int dep = st.forward ? (s == 0 ? 0 : fend[s - 1][st.micro]) : (s == p - 1 ? fend[s][st.micro] : bend[s + 1][st.micro]);
      if (dep < 0) continue;
      const int end = std::max(dep, free_at[static_cast<std::size_t>(s)]) + 1;
      (st.forward ? fend : bend)[s][st.micro] = end;
      free_at[static_cast<std::size_t>(s)] = end;
      ++i;
      moved = true;
    }
  }
  for (int s = 0; s < p; ++s) REQUIRE(next[static_cast<std::size_t>(s)] == order[static_cast<std::size_t>(s)].size());
  const int makespan = *std::max_element(free_at.begin(), free_at.end());
  REQUIRE(makespan > 0);
  return 1.0 - static_cast<double>(2 * m * p) / static_cast<double>(makespan * p);
}

}  // namespace

TEST_SUITE("examples::pipeline_schedule") {
  TEST_CASE("the compute orders of GPipe and 1F1B") {
    using S = std::vector<Step>;
    CHECK(steps(Schedule::gpipe, 0, 2, 3) == S{{true, 0}, {true, 1}, {true, 2}, {false, 0}, {false, 1}, {false, 2}});
    // stage 0 of 3: two warm-up forwards, then F B pairs, then the cool-down
    CHECK(steps(Schedule::one_f_one_b, 0, 3, 4) ==
          S{{true, 0}, {true, 1}, {true, 2}, {false, 0}, {true, 3}, {false, 1}, {false, 2}, {false, 3}});
    // the last stage alternates from the start
    CHECK(steps(Schedule::one_f_one_b, 2, 3, 2) == S{{true, 0}, {false, 0}, {true, 1}, {false, 1}});
    // fewer micro-batches than the warm-up: all forwards, then all backwards
    CHECK(steps(Schedule::one_f_one_b, 0, 4, 2) == S{{true, 0}, {true, 1}, {false, 0}, {false, 1}});
    CHECK(parse_schedule("gpipe") == Schedule::gpipe);
    CHECK(parse_schedule("1f1b") == Schedule::one_f_one_b);
    CHECK_THROWS_WITH_AS(parse_schedule("zb"), "unknown pipeline schedule 'zb': expected gpipe or 1f1b",
                         std::invalid_argument);
  }

  TEST_CASE("actions: the first stage reads data, the last computes the loss, sends fuse with receives") {
    using A = std::vector<Action>;
    const auto s0 = actions(steps(Schedule::one_f_one_b, 0, 2, 2), 0, 2);
    CHECK(s0 == A{{Op::forward, 0}, {Op::send_act, 0}, {Op::forward, 1}, {Op::send_act_recv_grad, 1, 0},
                  {Op::backward, 0}, {Op::recv_grad, 1}, {Op::backward, 1}});
    const auto s1 = actions(steps(Schedule::one_f_one_b, 1, 2, 2), 1, 2);
    CHECK(s1 == A{{Op::recv_act, 0}, {Op::forward, 0}, {Op::backward, 0}, {Op::send_grad_recv_act, 0, 1},
                  {Op::forward, 1}, {Op::backward, 1}, {Op::send_grad, 1}});
    CHECK(actions(steps(Schedule::gpipe, 0, 1, 2), 0, 1) ==
          A{{Op::forward, 0}, {Op::forward, 1}, {Op::backward, 0}, {Op::backward, 1}});
  }

  TEST_CASE("1F1B keeps at most p - s micro-batches in flight on stage s, GPipe all m") {
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 10; ++m)
        for (int s = 0; s < p; ++s)
          for (auto sched : {Schedule::gpipe, Schedule::one_f_one_b}) {
            int live = 0, peak = 0;
            for (const Step& st : steps(sched, s, p, m)) peak = std::max(peak, live += st.forward ? 1 : -1);
            CHECK(live == 0);
            CHECK(peak == (sched == Schedule::gpipe ? m : std::min(p - s, m)));
          }
  }

  TEST_CASE("every stage's actions meet their neighbours' with blocking sends: no deadlock, no mismatch") {
    for (auto sched : {Schedule::gpipe, Schedule::one_f_one_b})
      for (int p = 1; p <= 8; ++p)
        for (int m = 1; m <= 12; ++m) {
          CAPTURE(schedule_name(sched));
          CAPTURE(p);
          CAPTURE(m);
          CHECK_NOTHROW(simulate(sched, p, m));
        }
  }

  TEST_CASE("unit-time timeline: both schedules idle (p-1)/(m+p-1)") {
    for (auto sched : {Schedule::gpipe, Schedule::one_f_one_b})
      for (int p : {1, 2, 3, 4, 8})
        for (int m : {1, 2, 4, 8, 16}) {
          CAPTURE(schedule_name(sched));
          CAPTURE(p);
          CAPTURE(m);
          CHECK(std::fabs(simulated_bubble(sched, p, m) - bubble_formula(p, m)) < 1e-12);
        }
    CHECK(bubble_formula(4, 4) == doctest::Approx(3.0 / 7.0));
  }
}
