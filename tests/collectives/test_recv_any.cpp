// Communicator::recv_any (recv_any.cpp) with ranks as threads on shm, tcp and hierarchical: a
// receiver takes every other rank's message in whatever order they arrive and learns the source;
// only messages with its tag are taken (another tag's waits for its own receive); a message to
// itself counts; count mismatches are reported; nothing arriving is a timeout, not a hang.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.hpp"

namespace {

P2pArgs send_to(int peer, int tag, const std::vector<int>& v) {
  P2pArgs a;
  a.src = v.data();
  a.count = v.size();
  a.dtype = DTRAIN_INT32;
  a.peer = peer;
  a.tag = tag;
  return a;
}

}  // namespace

TEST_SUITE("collectives::recv_any") {
  TEST_CASE("every sender's message, in arrival order, with its source; other tags left for their receive") {
    for (const World& w : engine_worlds(4)) {
      CAPTURE(w.transport);
      CAPTURE(w.local_size);
      std::vector<std::string> wrong(4);
      std::atomic<bool> took9{false};
      auto errors = run_ranks(w, [&](Communicator& c, int r) {
        std::string& bad = wrong[static_cast<std::size_t>(r)];
        if (r != 0) {
          // Rank 3 sends last, once rank 0 has taken both messages of tag 9 that ranks 1 and 2 send
          // first (and polls for tag 5).
          if (r == 3) took9.wait(false);
          if (r != 3) {
            std::vector<int> other(3, -r);
            const P2pArgs o = send_to(0, 9, other);
            c.sendrecv(&o, nullptr);
          }
          std::vector<int> v(1000, r);
          const P2pArgs a = send_to(0, 5, v);
          c.sendrecv(&a, nullptr);
          return;
        }
        // Tag 9 first, from anyone: ranks 1 and 2.
        std::set<int> seen9;
        for (int k = 0; k < 2; ++k) {
          std::vector<int> buf(3);
          const int src = c.recv_any(buf.data(), 3, DTRAIN_INT32, 9);
          if (buf != std::vector<int>(3, -src)) bad = fmt::format("tag 9 from {}: wrong data", src);
          seen9.insert(src);
        }
        if (seen9 != std::set<int>{1, 2}) bad = "tag 9 sources";
        took9 = true;
        took9.notify_all();
        std::set<int> seen;
        for (int k = 0; k < 3; ++k) {
          std::vector<int> buf(1000, -1);
          const int src = c.recv_any(buf.data(), 1000, DTRAIN_INT32, 5);
          if (buf != std::vector<int>(1000, src)) bad = fmt::format("tag 5 from {}: wrong data", src);
          seen.insert(src);
        }
        if (seen != std::set<int>{1, 2, 3}) bad = "tag 5 sources";
        // To itself.
        std::vector<int> mine(2, 77), got(2);
        const P2pArgs s = send_to(0, 4, mine);
        c.sendrecv(&s, nullptr);
        if (c.recv_any(got.data(), 2, DTRAIN_INT32, 4) != 0 || got != mine) bad = "to itself";
      });
      for (int r = 0; r < 4; ++r) {
        CAPTURE(r);
        CHECK(errors[static_cast<std::size_t>(r)] == "");
        CHECK(wrong[static_cast<std::size_t>(r)] == "");
      }
    }
  }

  TEST_CASE("a count that does not match the message is a mismatch; nothing arriving a timeout") {
    for (const char* transport : {"auto", "tcp"}) {
      CAPTURE(transport);
      World w = world_of(2, transport, 1500ms);
      std::vector<std::pair<dtrain_status_t, std::string>> got(2);
      run_ranks(w, [&](Communicator& c, int r) {
        std::vector<int> v(10, 1);
        if (r == 1) {
          const P2pArgs a = send_to(0, 3, v);
          c.sendrecv(&a, nullptr);
          return;
        }
        got[0] = status_of([&] { c.recv_any(v.data(), 5, DTRAIN_INT32, 3); });
      });
      CHECK_MESSAGE(got[0].first == DTRAIN_ERR_MISMATCH, got[0].second);
      std::atomic<bool> done{false};
      run_ranks(w, [&](Communicator& c, int r) {
        std::vector<int> v(10, 1);
        if (r == 0) {
          const auto t0 = std::chrono::steady_clock::now();
          got[0] = status_of([&] { c.recv_any(v.data(), 10, DTRAIN_INT32, 3); });
          if (std::chrono::steady_clock::now() - t0 > 20s) got[0].second += " (took too long)";
          done = true;
          done.notify_all();
        }
        done.wait(false);  // rank 1 stays, silent
      });
      CHECK_MESSAGE(got[0].first == DTRAIN_ERR_TIMEOUT, got[0].second);
      CHECK_MESSAGE(got[0].second.find("recv_any (tag 3") != std::string::npos, got[0].second);
    }
  }
}
