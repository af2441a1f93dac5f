// Communicator::split with ranks as threads: colors, keys and the undefined color; the engine each
// group picks from where its members are (shm, tcp, hierarchical with even and uneven hosts, self);
// collectives and point-to-point on the groups against a float64 reference; splits of splits; two
// splits alive side by side; a split that meets a collective is a mismatch.
#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "harness.hpp"

namespace {

// What one rank saw of its group.
struct Seen {
  int rank = -1, size = 0;
  std::vector<int> members;  // world ranks
  std::string engine;
  bool ok = true;
};

// Allreduce (float64 sum), broadcast, allgather and a ring sendrecv on the group, checked against
// values computed from the world ranks of its members.
bool exercise(Communicator& g) {
  const int n = g.size(), me = g.rank();
  const std::size_t count = 70001;
  std::vector<double> x(count), y(count);
  for (std::size_t i = 0; i < count; ++i) x[i] = g.world_rank(me) * 0.5 + static_cast<double>(i % 97);
  g.allreduce(x.data(), y.data(), count, DTRAIN_FLOAT64, DTRAIN_SUM);
  double wsum = 0;
  for (int r = 0; r < n; ++r) wsum += g.world_rank(r) * 0.5;
  bool ok = true;
  for (std::size_t i = 0; i < count; i += 101) ok = ok && y[i] == wsum + n * static_cast<double>(i % 97);
  std::int64_t mine = g.world_rank(me), all[64] = {};
  g.allgather(&mine, all, 1, DTRAIN_INT64);
  for (int r = 0; r < n; ++r) ok = ok && all[r] == g.world_rank(r);
  std::int32_t b[3] = {me, 11, 12};
  g.broadcast(b, b, 3, DTRAIN_INT32, n - 1);
  ok = ok && b[0] == n - 1;
  std::int64_t from = -1;
  P2pArgs s{&mine, nullptr, 1, DTRAIN_INT64, (me + 1) % n, 7, false}, v{nullptr, &from, 1, DTRAIN_INT64, (me + n - 1) % n, 7, false};
  g.sendrecv(&s, &v);
  return ok && from == g.world_rank((me + n - 1) % n);
}

Seen seen(Communicator* g) {
  Seen s;
  if (g == nullptr) return s;
  s.rank = g->rank();
  s.size = g->size();
  for (int r = 0; r < s.size; ++r) s.members.push_back(g->world_rank(r));
  s.engine = g->engine_name();
  s.ok = exercise(*g);
  return s;
}

}  // namespace

TEST_SUITE("collectives::split") {
  TEST_CASE("colors and keys order the new ranks; the undefined color joins none") {
    World w;
    w.size = 6;
    std::vector<Seen> out(6);
    auto errors = run_ranks(w, [&](Communicator& c, int r) {
      // Rank 5 joins none; colors by parity; keys reverse the order, with a tie on 1 and 3.
      const int key = r == 3 ? 10 - 1 : 10 - r;
      auto s = c.split(r == 5 ? -1 : r % 2, key, true);
      out[static_cast<std::size_t>(r)] = seen(s.comm.get());
      if (!s.all_flag) throw std::runtime_error("all_flag");
      c.barrier();  // the parent lives on
    });
    no_errors(errors);
    CHECK(out[5].size == 0);
    CHECK(out[0].members == std::vector<int>{4, 2, 0});
    CHECK(out[1].members == std::vector<int>{1, 3});  // keys 9 and 9: parent order breaks the tie
    CHECK(out[0].rank == 2);
    CHECK(out[4].rank == 0);
    CHECK(out[3].rank == 1);
    for (int r = 0; r < 5; ++r) CHECK(out[static_cast<std::size_t>(r)].ok);
    CHECK(out[0].engine == "shm");
  }

  TEST_CASE("each group picks its engine from where its members are") {
    // Two hosts of four ranks (world ranks 0-3 and 4-7).
    World w;
    w.size = 8;
    w.local_size = 4;
    const std::map<std::string, std::function<int(int)>> splits = {
        {"shm", [](int r) { return r / 4; }},                    // one host each
        {"tcp", [](int r) { return r % 4; }},                    // one rank per host
        {"hierarchical", [](int r) { return r % 2; }},           // two per host
        {"hierarchical-uneven", [](int r) { return r < 3 ? 0 : 1; }},  // {0,1,2} and 3 + 4..7
        {"self", [](int r) { return r; }}};
    for (const auto& [want, color] : splits) {
      CAPTURE(want);
      std::vector<Seen> out(8);
      auto errors = run_ranks(w, [&](Communicator& c, int r) {
        auto s = c.split(color(r), r, false);
        out[static_cast<std::size_t>(r)] = seen(s.comm.get());
      });
      no_errors(errors);
      for (int r = 0; r < 8; ++r) {
        CAPTURE(r);
        const Seen& s = out[static_cast<std::size_t>(r)];
        CHECK(s.ok);
        std::string engine = want == "hierarchical-uneven" ? (r < 3 ? "shm" : "hierarchical") : want;
        CHECK(s.engine == engine);
      }
    }
  }

  TEST_CASE("splits of splits, and two splits alive side by side, on every engine") {
    for (const char* transport : {"auto", "tcp"}) {
      for (int local : {-1, 4}) {
        CAPTURE(transport);
        CAPTURE(local);
        World w;
        w.size = 8;
        w.local_size = local;
        w.transport = transport;
        std::vector<Seen> quarter(8), rows(8), cols(8);
        auto errors = run_ranks(w, [&](Communicator& c, int r) {
          auto half = c.split(r / 4, r, false);               // {0..3}, {4..7}
          auto q = half.comm->split(half.comm->rank() / 2, 0, false);  // pairs
          quarter[static_cast<std::size_t>(r)] = seen(q.comm.get());
          auto row = c.split(r / 2, r, false), col = c.split(r % 2, r, false);
          // Interleave calls on both, and on the world and the half.
          for (int k = 0; k < 2; ++k) {
            rows[static_cast<std::size_t>(r)] = seen(row.comm.get());
            cols[static_cast<std::size_t>(r)] = seen(col.comm.get());
            if (!exercise(c) || !exercise(*half.comm)) throw std::runtime_error("parent collective");
          }
        });
        no_errors(errors);
        for (int r = 0; r < 8; ++r) {
          CAPTURE(r);
          CHECK(quarter[static_cast<std::size_t>(r)].ok);
          CHECK(quarter[static_cast<std::size_t>(r)].members == std::vector<int>{r & ~1, r | 1});
          CHECK(rows[static_cast<std::size_t>(r)].ok);
          CHECK(cols[static_cast<std::size_t>(r)].ok);
          CHECK(cols[static_cast<std::size_t>(r)].size == 4);
        }
      }
    }
  }

  TEST_CASE("a split where another rank calls a collective is a mismatch on every rank") {
    for (const char* transport : {"auto", "tcp"}) {
      CAPTURE(transport);
      World w = world_of(3, transport, 20s);
      std::vector<std::string> texts(3);
      auto errors = run_ranks(w, [&](Communicator& c, int r) {
        try {
          if (r == 2) {
            double x[5] = {}, y[5];
            c.allreduce(x, y, 5, DTRAIN_FLOAT64, DTRAIN_SUM);
          } else {
            c.split(0, r, false);
          }
        } catch (const CollError& e) {
          texts[static_cast<std::size_t>(r)] = fmt::format("{} {}", static_cast<int>(e.status()), e.what());
        }
      });
      no_errors(errors);
      for (int r = 0; r < 3; ++r) {
        CAPTURE(texts[static_cast<std::size_t>(r)]);
        CHECK(texts[static_cast<std::size_t>(r)].rfind("5 ", 0) == 0);  // DTRAIN_ERR_MISMATCH
      }
      CHECK(texts[0].find("comm_split") != std::string::npos);
    }
  }
}
