// Point-to-point refusals and failures with ranks as threads, on every engine: bad arguments (the
// communicator stays usable), count/dtype/tag mismatches named on both sides, a receive that times
// out naming the peer that never sent, a peer that destroys its communicator instead of sending, and
// a receive that meets the peer's collective instead of its message.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>

#include "harness.hpp"

namespace {

std::vector<World> worlds(int size, std::chrono::milliseconds timeout) {
  World shm, tcp;
  shm.size = tcp.size = size;
  shm.timeout = tcp.timeout = timeout;
  tcp.transport = "tcp";
  return {shm, tcp};
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_SUITE("collectives::p2p_failures") {
  TEST_CASE("bad arguments are refused before anything is sent; the communicator stays usable") {
    World w;
    w.size = 2;
    std::vector<std::string> texts(2);
    auto errors = run_ranks(w, [&](Communicator& c, int r) {
      float x[4] = {};
      std::string t;
      for (P2pArgs a : {P2pArgs{x, nullptr, 4, DTRAIN_FLOAT32, 2, 0, false},
                        P2pArgs{x, nullptr, 4, DTRAIN_FLOAT32, -1, 0, false},
                        P2pArgs{x, nullptr, 4, static_cast<dtrain_dtype_t>(42), 1 - r, 0, false},
                        P2pArgs{x, nullptr, 4, DTRAIN_FLOAT32, 1 - r, -5, false},
                        P2pArgs{nullptr, nullptr, 4, DTRAIN_FLOAT32, 1 - r, 0, false}}) {
        auto [st, msg] = status_of([&] { c.sendrecv(&a, nullptr); });
        if (st != DTRAIN_ERR_INVALID_ARGUMENT) throw std::runtime_error("want invalid argument, got: " + msg);
        t += msg + "\n";
      }
      texts[static_cast<std::size_t>(r)] = t;
      P2pArgs s{x, nullptr, 4, DTRAIN_FLOAT32, 1 - r, 0, false}, v{nullptr, x, 4, DTRAIN_FLOAT32, 1 - r, 0, false};
      c.sendrecv(&s, &v);  // numbering was not disturbed
      c.barrier();
    });
    CHECK(errors[0] == "");
    CHECK(errors[1] == "");
    CHECK(has(texts[0], "peer 2 is not a rank of this communicator (0..1)"));
    CHECK(has(texts[0], "peer -1"));
    CHECK(has(texts[0], "invalid dtype 42"));
    CHECK(has(texts[0], "tag -5 is negative"));
    CHECK(has(texts[0], "NULL with a count of 4"));
  }

  TEST_CASE("count, dtype and tag mismatches fail the receive naming both sides, and then the sender") {
    for (const World& base : worlds(2, 20s)) {
      for (int variant = 0; variant < 3; ++variant) {
        CAPTURE(base.transport);
        CAPTURE(variant);
        std::vector<std::pair<dtrain_status_t, std::string>> got(2);
        auto errors = run_ranks(base, [&](Communicator& c, int r) {
          std::vector<std::int32_t> buf(1000, 7);
          if (r == 0) {
            P2pArgs a{buf.data(), nullptr, 1000, DTRAIN_INT32, 1, 5, false};
            c.sendrecv(&a, nullptr);
            // The next call learns that rank 1 failed.
            P2pArgs b{nullptr, buf.data(), 10, DTRAIN_INT32, 1, 0, false};
            got[0] = status_of([&] { c.sendrecv(nullptr, &b); });
          } else {
            P2pArgs a{nullptr, buf.data(), variant == 0 ? 999u : 1000u, variant == 1 ? DTRAIN_FLOAT32 : DTRAIN_INT32, 0,
                      variant == 2 ? 6 : 5, false};
            got[1] = status_of([&] { c.sendrecv(nullptr, &a); });
          }
        });
        CHECK(errors[0] == "");
        CHECK(errors[1] == "");
        INFO(got[1].second);
        CHECK(got[1].first == DTRAIN_ERR_MISMATCH);
        CHECK(has(got[1].second, "recv #1"));
        CHECK(has(got[1].second, "from rank 0 on rank 1 does not match rank 0's send #1 (tag 5, count 1000, int32)"));
        CHECK(has(got[1].second, variant == 0 ? "count 999" : variant == 1 ? "float32" : "tag 6"));
        INFO(got[0].second);
        CHECK(got[0].first == DTRAIN_ERR_MISMATCH);  // the root cause, from rank 1
        CHECK(has(got[0].second, "rank 1"));
      }
    }
  }

  TEST_CASE("a receive times out naming the peer that never sent") {
    for (const World& base : worlds(2, 1500ms)) {
      CAPTURE(base.transport);
      std::pair<dtrain_status_t, std::string> got;
      std::atomic<bool> done{false};
      const auto t0 = std::chrono::steady_clock::now();
      auto errors = run_ranks(base, [&](Communicator& c, int r) {
        double x[8];
        if (r == 0) {
          P2pArgs a{nullptr, x, 8, DTRAIN_FLOAT64, 1, 3, false};
          got = status_of([&] { c.sendrecv(nullptr, &a); });
          done = true;
          done.notify_all();
        } else {
          done.wait(false);  // alive, never sends
        }
      });
      const auto took = std::chrono::steady_clock::now() - t0;
      CHECK(errors[0] == "");
      INFO(got.second);
      CHECK(got.first == DTRAIN_ERR_TIMEOUT);
      CHECK(has(got.second, "recv #1 (tag 3, count 8, float64) from rank 1 timed out after 1.5 s on rank 0"));
      CHECK(has(got.second, "rank 1"));
      CHECK(took < 10s);
    }
  }

  TEST_CASE("a peer that destroys its communicator instead of sending is named") {
    for (const World& base : worlds(2, 20s)) {
      CAPTURE(base.transport);
      std::pair<dtrain_status_t, std::string> got;
      std::atomic<bool> receiving{false};
      auto errors = run_ranks(base, [&](Communicator& c, int r) {
        std::vector<double> x(1 << 20);
        if (r == 0) {
          P2pArgs a{nullptr, x.data(), x.size(), DTRAIN_FLOAT64, 1, 0, false};
          receiving = true;
          receiving.notify_all();
          got = status_of([&] { c.sendrecv(nullptr, &a); });
        } else {
          receiving.wait(false);  // then leaves without sending, as rank 0 receives
        }
      });
      INFO(got.second);
      CHECK(got.first == DTRAIN_ERR_PEER);
      CHECK(has(got.second, "rank 1"));
      CHECK((has(got.second, "destroyed its communicator") || has(got.second, "closed the connection")));
    }
  }

  TEST_CASE("TCP: a receive that meets the peer's collective instead of its message is a mismatch") {
    World w;
    w.size = 2;
    w.transport = "tcp";
    w.timeout = 20s;
    std::vector<std::pair<dtrain_status_t, std::string>> got(2);
    auto errors = run_ranks(w, [&](Communicator& c, int r) {
      float x[16] = {}, y[16];
      if (r == 0) {
        got[0] = status_of([&] { c.allreduce(x, y, 16, DTRAIN_FLOAT32, DTRAIN_SUM); });
      } else {
        P2pArgs a{nullptr, y, 16, DTRAIN_FLOAT32, 0, 0, false};
        got[1] = status_of([&] { c.sendrecv(nullptr, &a); });
      }
    });
    INFO(got[1].second);
    CHECK(got[1].first == DTRAIN_ERR_MISMATCH);
    CHECK(has(got[1].second, "belongs to its collective call allreduce"));
    CHECK(got[0].first != DTRAIN_SUCCESS);
  }
}
