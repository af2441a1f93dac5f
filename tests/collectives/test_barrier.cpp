// The shared-memory barrier (engine/shm/barrier.cpp) and what it asks Peers (peers.cpp) between its
// sleeps, local ranks as threads over one segment: the arrival words' give-up marks; no rank passes
// a sync before every rank reached it, thousands of times; mismatched calls fail on every rank with every rank's call listed; a
// sleeping rank is woken by a peer's abort or departure and fails naming it; a rank that never
// arrives is named when the deadline passes.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <vector>

#include "shm_ranks.hpp"

using namespace dtrain::coll;
using namespace dtrain::coll::test;
using namespace std::chrono_literals;

namespace {

// Whether `n` local ranks sleep in a collective wait (the header's count of sleepers).
bool sleeping(const shm::Segment& s, std::uint32_t n) { return s.header().sleepers.load() >= n; }

}  // namespace

TEST_SUITE("collectives::shm::barrier") {
  TEST_CASE("an arrival word given up for the next sync still says the rank reached this one") {
    // A rank at sync 8 gives up on a peer that reached sync 7 only; slower ranks may still wait at 7.
    std::atomic<std::uint64_t> word{7};
    CHECK(shm::give_up_on(word, 8));
    CHECK((word.load() & shm::kGivenUp) != 0);
    CHECK(shm::reached(word.load(), 7));     // sync 7 passes for the ranks still in it
    CHECK_FALSE(shm::reached(word.load(), 8));
    CHECK(shm::give_up_on(word, 8));          // marked by another: still given up
    CHECK_FALSE(shm::arrive(word, 7, 8));     // and its rank can no longer arrive at 8
    // A rank that arrived first wins against the give-up.
    std::atomic<std::uint64_t> early{7};
    CHECK(shm::arrive(early, 7, 8));
    CHECK_FALSE(shm::give_up_on(early, 8));
    CHECK(early.load() == 8);
  }

  TEST_CASE("no rank passes a sync before every rank reached it") {
    LocalGroup g;
    g.size = 3;
    constexpr int kSyncs = 3000;
    std::vector<std::atomic<int>> reached(3);
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      const OpDesc d = op_desc(1, OpKind::barrier, 0, DTRAIN_UINT8);
      rank->peers.begin(d);
      for (int k = 1; k <= kSyncs; ++k) {
        reached[static_cast<std::size_t>(r)] = k;
        rank->barrier.sync(d);
        for (int j = 0; j < 3; ++j)
          if (reached[static_cast<std::size_t>(j)].load() < k)
            throw std::runtime_error("rank " + std::to_string(r) + " passed sync " + std::to_string(k) +
                                     " before rank " + std::to_string(j) + " reached it");
      }
      rank->peers.end();
    }));
  }

  TEST_CASE("mismatched calls fail at their first sync on every rank, listing every rank's call") {
    LocalGroup g;
    g.size = 3;
    auto errors = on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      const OpDesc d = op_desc(4, OpKind::allreduce, r == 2 ? 5 : 4, DTRAIN_FLOAT32);
      rank->peers.begin(d);
      rank->barrier.sync(d);
    });
    for (const auto& e : errors) {
      CHECK_MESSAGE(e.find("mismatched collective calls at call #4") != std::string::npos, e);
      CHECK(e.find("rank 2: allreduce(count 5, float32, sum) #4") != std::string::npos);
    }
  }

  TEST_CASE("a sleeping rank is woken by a peer's abort and fails with its status and reason") {
    LocalGroup g;
    g.size = 2;
    g.spin_us = 0;
    auto errors = on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      if (r == 1) {
        // Once rank 0 sleeps in the sync, this rank fails elsewhere and says so.
        if (!wait_until([&] { return sleeping(rank->segment, 1); }, 30s)) throw std::runtime_error("rank 0 never slept");
        rank->peers.abort(DTRAIN_ERR_NCCL, "the NCCL side failed");
        return;
      }
      const OpDesc d = op_desc(1, OpKind::barrier, 0, DTRAIN_UINT8);
      rank->peers.begin(d);
      const auto [st, text] = status_of([&] { rank->barrier.sync(d); });
      if (st != DTRAIN_ERR_NCCL || text.find("rank 1 failed: the NCCL side failed") == std::string::npos)
        throw std::runtime_error("rank 0 got: " + text);
    });
    no_errors(errors);
  }

  TEST_CASE("a peer that leaves while the others sleep in a sync: they fail naming it") {
    LocalGroup g;
    g.size = 3;
    g.spin_us = 0;
    std::vector<std::string> texts(3);
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      const OpDesc d = op_desc(2, OpKind::barrier, 0, DTRAIN_UINT8);
      if (r == 2) {
        if (!wait_until([&] { return sleeping(rank->segment, 2); }, 30s)) throw std::runtime_error("nobody slept");
        rank.reset();  // leaves without arriving
        return;
      }
      rank->peers.begin(d);
      texts[static_cast<std::size_t>(r)] = status_of([&] { rank->barrier.sync(d); }).second;
    }));
    for (int r : {0, 1}) {
      const auto& t = texts[static_cast<std::size_t>(r)];
      CHECK_MESSAGE(t.find("rank 2 destroyed its communicator instead of joining") != std::string::npos, t);
    }
  }

  TEST_CASE("a rank that never arrives: the others time out naming it and where everyone is") {
    LocalGroup g;
    g.size = 3;
    std::vector<std::string> texts(3);
    std::atomic<int> done{0};
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      const OpDesc first = op_desc(6, OpKind::barrier, 0, DTRAIN_UINT8);
      rank->peers.begin(first);
      rank->barrier.sync(first);
      rank->peers.end();
      if (r == 1) {  // stays (alive, not arrived) until the others gave up
        for (int v = done.load(); v < 2; v = done.load()) done.wait(v);
        return;
      }
      // Time itself is under test: the call's deadline.
      const OpDesc d = op_desc(7, OpKind::allreduce, 3, DTRAIN_INT32, 300ms);
      rank->peers.begin(d);
      texts[static_cast<std::size_t>(r)] = status_of([&] { rank->barrier.sync(d); }).second;
      ++done;
      done.notify_all();
    }));
    for (int r : {0, 2}) {
      const auto& t = texts[static_cast<std::size_t>(r)];
      CHECK_MESSAGE(t.find("allreduce(count 3, int32, sum) #7 timed out after 0.3 s") != std::string::npos, t);
      CHECK(t.find("ranks [1] never arrived") != std::string::npos);
      CHECK(t.find("rank 1: last finished barrier #6 (not arrived)") != std::string::npos);
    }
  }
}
