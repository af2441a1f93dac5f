// The engine seam (engine/engine.hpp) with ranks as threads over an in-memory store:
// make_engine() picks the engine from where the group's ranks are, and every engine runs over a
// group that is a subset of the world, under its own store keys, next to another group on the same
// store, naming world ranks in its messages.
#include <doctest/doctest.h>

#include <unistd.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calls.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "engine/engine.hpp"
#include "ranks.hpp"

using namespace dtrain::coll;
using dtrain::coll::test::on_threads;
using dtrain::coll::test::op_desc;
using namespace std::chrono_literals;

namespace {

// One group: world rank and host of each group rank, and the engine kind asked for.
struct GroupSpec {
  std::vector<int> members;
  std::vector<int> host;  // host id of each group rank
  std::string kind = "auto";
  std::string prefix;
};

EngineOptions options_for(const GroupSpec& g, int rank, dtrain::rdzv::Store* store) {
  EngineOptions o;
  o.members = g.members;
  o.rank = rank;
  for (int r = 0; r < static_cast<int>(g.members.size()); ++r)
    if (g.host[static_cast<std::size_t>(r)] == g.host[static_cast<std::size_t>(rank)]) o.node.push_back(r);
  o.kind = g.kind;
  o.store = store;
  o.key_prefix = g.prefix;
  o.shm_name_prefix = fmt::format("dtrain-engine-test-{}", ::getpid());
  o.advertise = "127.0.0.1";
  o.timeout = 20s;
  o.shm_slot_bytes = 64 * 1024;
  o.tcp_chunk_bytes = 16 * 1024;
  o.spin_us = 20;
  return o;
}

OpDesc op(std::uint64_t seq, OpKind kind, std::size_t count, dtrain_dtype_t dtype, int root = 0) {
  return op_desc(seq, kind, count, dtype, 20s, DTRAIN_SUM, root);
}

// Runs body(engine, group rank) on a thread per member of every group, all on one store;
// returns "group/rank: error" lines for the ranks that threw.
std::vector<std::string> run_groups(const std::vector<GroupSpec>& groups,
                                    const std::function<void(Engine&, const GroupSpec&, int)>& body) {
  auto store = dtrain::rdzv::make_memory_store();
  std::vector<std::pair<std::size_t, int>> who;  // (group, rank) of each thread
  for (std::size_t gi = 0; gi < groups.size(); ++gi)
    for (int r = 0; r < static_cast<int>(groups[gi].members.size()); ++r) who.emplace_back(gi, r);
  auto failures = on_threads(static_cast<int>(who.size()), [&](int t) {
    const auto [gi, r] = who[static_cast<std::size_t>(t)];
    auto e = make_engine(options_for(groups[gi], r, store.get()));
    body(*e, groups[gi], r);
  });
  std::vector<std::string> errors;
  for (std::size_t t = 0; t < who.size(); ++t)
    if (!failures[t].empty()) errors.push_back(fmt::format("group {} rank {}: {}", who[t].first, who[t].second, failures[t]));
  return errors;
}

// allreduce, broadcast from the last rank, allgather and barrier, checked against the world ranks.
void exercise(Engine& t, const GroupSpec& g, int r) {
  const int n = static_cast<int>(g.members.size());
  const int me = g.members[static_cast<std::size_t>(r)];
  std::uint64_t seq = 0;
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{100000}}) {
    std::vector<float> in(count, static_cast<float>(me)), out(count, -1.0f);
    t.allreduce(op(++seq, OpKind::allreduce, count, DTRAIN_FLOAT32), in.data(), out.data());
    float want = 0;
    for (int w : g.members) want += static_cast<float>(w);
    for (float v : out)
      if (v != want) throw std::runtime_error(fmt::format("allreduce of {}: {} != {}", count, v, want));
    std::vector<std::int32_t> b(count, r == n - 1 ? me : -1);
    t.broadcast(op(++seq, OpKind::broadcast, count, DTRAIN_INT32, n - 1), b.data(), b.data());
    for (auto v : b)
      if (v != g.members.back()) throw std::runtime_error(fmt::format("broadcast of {}: {}", count, v));
  }
  std::vector<std::int64_t> gathered(static_cast<std::size_t>(n), -1);
  const std::int64_t mine = me;
  t.allgather(op(++seq, OpKind::allgather, 1, DTRAIN_INT64), &mine, gathered.data());
  for (int j = 0; j < n; ++j)
    if (gathered[static_cast<std::size_t>(j)] != g.members[static_cast<std::size_t>(j)])
      throw std::runtime_error(fmt::format("allgather: block {} = {}", j, gathered[static_cast<std::size_t>(j)]));
  t.barrier(op(++seq, OpKind::barrier, 0, DTRAIN_UINT8));
}

}  // namespace

TEST_SUITE("collectives::engine") {
  TEST_CASE("the factory picks the engine from where the group's ranks are") {
    struct Case {
      GroupSpec g;
      const char* want;
    };
    const Case cases[] = {
        {{{7}, {0}, "auto", "a/"}, "self"},
        {{{0, 1, 2}, {0, 0, 0}, "auto", "b/"}, "shm"},
        {{{0, 1, 2}, {0, 0, 0}, "tcp", "c/"}, "tcp"},
        {{{0, 1, 2}, {0, 1, 2}, "auto", "d/"}, "tcp"},
        {{{0, 1, 2, 3}, {0, 0, 1, 1}, "auto", "e/"}, "hierarchical"},
    };
    for (const auto& c : cases) {
      CAPTURE(c.want);
      std::vector<std::string> names(c.g.members.size());
      auto errors = run_groups({c.g}, [&](Engine& t, const GroupSpec&, int r) {
        names[static_cast<std::size_t>(r)] = t.name();
        t.barrier(op(1, OpKind::barrier, 0, DTRAIN_UINT8));
      });
      CHECK_MESSAGE(errors.empty(), fmt::format("{}", fmt::join(errors, "\n")));
      for (const auto& name : names) CHECK(name == c.want);
    }
  }

  TEST_CASE("groups of some of the world's ranks, side by side on one store") {
    for (const char* kind : {"auto", "tcp"}) {
      CAPTURE(kind);
      // World ranks 0..7 on two hosts (0-3, 4-7): the odd ranks of both hosts form a hierarchical
      // group (or tcp), ranks 0 and 2 a shared-memory group, ranks 4 and 6 another on the other host.
      const std::vector<GroupSpec> groups = {
          {{1, 3, 5, 7}, {0, 0, 1, 1}, kind, "coll/1/split/1/1/"},
          {{0, 2}, {0, 0}, kind, "coll/1/split/1/0/"},
          {{4, 6}, {1, 1}, kind, "coll/1/split/1/2/"},
      };
      auto errors = run_groups(groups, exercise);
      CHECK_MESSAGE(errors.empty(), fmt::format("{}", fmt::join(errors, "\n")));
    }
  }

  TEST_CASE("a mismatch inside a group names world ranks") {
    for (const char* kind : {"auto", "tcp"}) {
      CAPTURE(kind);
      const GroupSpec g{{3, 5}, {0, 0}, kind, "mismatch/"};
      std::vector<std::string> text(2);
      auto errors = run_groups({g}, [&](Engine& t, const GroupSpec&, int r) {
        float x[4] = {1, 2, 3, 4};
        try {
          t.allreduce(op(1, OpKind::allreduce, r == 0 ? 4 : 3, DTRAIN_FLOAT32), x, x);
        } catch (const CollError& e) {
          CHECK(e.status() == DTRAIN_ERR_MISMATCH);
          text[static_cast<std::size_t>(r)] = e.what();
          t.abort(e.status(), e.what());
        }
      });
      CHECK(errors.empty());
      for (const auto& m : text) {
        CHECK_MESSAGE(m.find("rank 3:") != std::string::npos, m);
        CHECK_MESSAGE(m.find("rank 5:") != std::string::npos, m);
      }
    }
  }
}
