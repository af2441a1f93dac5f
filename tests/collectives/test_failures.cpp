// Failure modes of a communicator with ranks as threads: mismatched calls, a rank that never arrives,
// a rank that arrives after the others gave up (it fails too: one outcome per call), use after an
// error, bad arguments, a rank that destroys its communicator early.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

const char* kEngines[] = {"auto", "tcp"};

}  // namespace

TEST_SUITE("collectives::failures") {
  TEST_CASE("mismatched count, dtype, op, root or call fail on every rank") {
    for (const char* transport : kEngines) {
      for (int variant = 0; variant < 5; ++variant) {
        CAPTURE(transport);
        CAPTURE(variant);
        World w = world_of(3, transport, 20s);
        std::vector<dtrain_status_t> st(3, DTRAIN_SUCCESS), after(3, DTRAIN_SUCCESS);
        std::vector<std::string> text(3);
        auto errors = run_ranks(w, [&](Communicator& c, int r) {
          std::vector<float> a(8, 1.0f), b(8);
          c.allreduce(a.data(), b.data(), 4, DTRAIN_FLOAT32, DTRAIN_SUM);  // a good call first
          const bool odd = r == 2;
          auto res = status_of([&] {
            switch (variant) {
              case 0: c.allreduce(a.data(), b.data(), odd ? 5 : 4, DTRAIN_FLOAT32, DTRAIN_SUM); break;
              case 1: c.allreduce(a.data(), b.data(), 4, odd ? DTRAIN_INT32 : DTRAIN_FLOAT32, DTRAIN_SUM); break;
              case 2: c.allreduce(a.data(), b.data(), 4, DTRAIN_FLOAT32, odd ? DTRAIN_MAX : DTRAIN_SUM); break;
              case 3: c.broadcast(a.data(), b.data(), 4, DTRAIN_FLOAT32, odd ? 1 : 0); break;
              case 4:
                if (odd)
                  c.barrier();
                else
                  c.allreduce(a.data(), b.data(), 4, DTRAIN_FLOAT32, DTRAIN_SUM);
                break;
            }
          });
          st[static_cast<std::size_t>(r)] = res.first;
          text[static_cast<std::size_t>(r)] = res.second;
          after[static_cast<std::size_t>(r)] = status_of([&] { c.barrier(); }).first;
        });
        for (int r = 0; r < 3; ++r) {
          CAPTURE(r);
          CHECK(errors[static_cast<std::size_t>(r)].empty());
          CHECK_MESSAGE(st[static_cast<std::size_t>(r)] == DTRAIN_ERR_MISMATCH, text[static_cast<std::size_t>(r)]);
          CHECK(text[static_cast<std::size_t>(r)].find("mismatched") != std::string::npos);
          CHECK(after[static_cast<std::size_t>(r)] == DTRAIN_ERR_ABORTED);  // destroyable, not usable
        }
      }
    }
  }

  TEST_CASE("a rank that never arrives: the others time out naming it and where everyone is") {
    struct Outcome {
      std::vector<dtrain_status_t> st = std::vector<dtrain_status_t>(3, DTRAIN_SUCCESS);
      std::vector<std::string> text = std::vector<std::string>(3), errors;
      std::chrono::steady_clock::duration took{};
    };
    // Both engines at once, a world each: each waits out its timeout.
    std::vector<Outcome> out(std::size(kEngines));
    no_errors(on_threads(static_cast<int>(std::size(kEngines)), [&](int e) {
      Outcome& o = out[static_cast<std::size_t>(e)];
      World w = world_of(3, kEngines[e], 1500ms);
      std::atomic<int> done{0};
      auto t0 = std::chrono::steady_clock::now();
      o.errors = run_ranks(w, [&](Communicator& c, int r) {
        std::vector<double> a(10, 1.0);
        c.allreduce(a.data(), a.data(), a.size(), DTRAIN_FLOAT64, DTRAIN_SUM);
        if (r == 1) {  // stays away from call #2 until the others gave up
          for (int v = done.load(); v < 2; v = done.load()) done.wait(v);
          return;
        }
        auto res = status_of([&] { c.allreduce(a.data(), a.data(), a.size(), DTRAIN_FLOAT64, DTRAIN_SUM); });
        o.st[static_cast<std::size_t>(r)] = res.first;
        o.text[static_cast<std::size_t>(r)] = res.second;
        ++done;
        done.notify_all();
      });
      o.took = std::chrono::steady_clock::now() - t0;
    }));
    for (std::size_t e = 0; e < std::size(kEngines); ++e) {
      const std::string transport = kEngines[e];
      CAPTURE(transport);
      const Outcome& o = out[e];
      CHECK(o.took < 30s);  // a generous bound: the point is "no hang", not speed
      for (int r : {0, 2}) {
        CAPTURE(r);
        CHECK(o.errors[static_cast<std::size_t>(r)].empty());
        const auto& m = o.text[static_cast<std::size_t>(r)];
        // TCP: a rank may also learn of the failure from its ring neighbour giving up first.
        CHECK_MESSAGE((o.st[static_cast<std::size_t>(r)] == DTRAIN_ERR_TIMEOUT ||
                       o.st[static_cast<std::size_t>(r)] == DTRAIN_ERR_PEER),
                      m);
        CHECK_MESSAGE(m.find("allreduce") != std::string::npos, m);
        CHECK_MESSAGE(m.find("#2") != std::string::npos, m);
        CHECK_MESSAGE(m.find("rank 1") != std::string::npos, m);
      }
      if (transport == "auto") {
        CHECK(o.text[0].find("ranks [1] never arrived") != std::string::npos);
        CHECK(o.text[0].find("rank 1: last finished allreduce #1") != std::string::npos);
      }
    }
  }

  TEST_CASE("a late rank fails the call the others gave up on, with their cause, on every engine") {
    std::vector<World> worlds = engine_worlds(4);
    worlds.push_back(world_of(2, "auto", 1s));
    worlds.push_back(world_of(2, "tcp", 1s));
    const char* kinds[] = {"small allreduce", "large allreduce", "barrier", "broadcast"};
    constexpr int kKinds = 4;
    struct Outcome {
      std::vector<dtrain_status_t> st;
      std::vector<std::string> text, errors;
    };
    for (World w : worlds) {
      w.timeout = 1s;  // the others give up on call #2 a second after they reached it
      const int late = 1;
      // The four kinds at once, a world each (own store, own segment): each waits out its timeout.
      std::vector<Outcome> out(kKinds);
      no_errors(on_threads(kKinds, [&](int kind) {
        Outcome& o = out[static_cast<std::size_t>(kind)];
        o.st.assign(static_cast<std::size_t>(w.size), DTRAIN_SUCCESS);
        o.text.assign(static_cast<std::size_t>(w.size), "");
        std::atomic<int> failed{0};
        o.errors = run_ranks(w, [&](Communicator& c, int r) {
          const std::size_t count = kind == 1 ? 32768 : 8;
          std::vector<float> a(count, 1.0f), b(count, 0.0f);
          c.allreduce(a.data(), b.data(), count, DTRAIN_FLOAT32, DTRAIN_SUM);  // call #1, together
          if (r == late)  // reaches call #2 once every other rank gave up on it
            for (int v = failed.load(); v < w.size - 1; v = failed.load()) failed.wait(v);
          auto res = status_of([&] {
            switch (kind) {
              case 2: c.barrier(); break;
              case 3: c.broadcast(a.data(), b.data(), count, DTRAIN_FLOAT32, 0); break;
              default: c.allreduce(a.data(), b.data(), count, DTRAIN_FLOAT32, DTRAIN_SUM); break;
            }
          });
          o.st[static_cast<std::size_t>(r)] = res.first;
          o.text[static_cast<std::size_t>(r)] = res.second;
          if (r != late) {
            ++failed;
            failed.notify_all();
          }
        });
      }));
      for (int kind = 0; kind < kKinds; ++kind) {
        CAPTURE(w.size);
        CAPTURE(w.transport);
        CAPTURE(w.local_size);
        const std::string what = kinds[kind];
        CAPTURE(what);
        const Outcome& o = out[static_cast<std::size_t>(kind)];
        no_errors(o.errors);
        bool cause_named = false;
        for (int r = 0; r < w.size; ++r) {
          CAPTURE(r);
          const auto& m = o.text[static_cast<std::size_t>(r)];
          CHECK_MESSAGE(o.st[static_cast<std::size_t>(r)] != DTRAIN_SUCCESS, m);
          CHECK_MESSAGE(m.find("#2") != std::string::npos, m);
          if (r != late && o.st[static_cast<std::size_t>(r)] == DTRAIN_ERR_TIMEOUT)
            cause_named = cause_named || o.text[late].find(m) != std::string::npos;
        }
        // The late rank fails with the status and the message of a rank that timed out.
        CHECK_MESSAGE(o.st[late] == DTRAIN_ERR_TIMEOUT, o.text[late]);
        CHECK_MESSAGE(cause_named, o.text[late]);
      }
    }
  }

  TEST_CASE("bad arguments are refused locally and leave the communicator usable") {
    World w;
    w.size = 2;
    std::vector<dtrain_status_t> a(2), b(2), c3(2), ok(2);
    auto errors = run_ranks(w, [&](Communicator& c, int r) {
      float x[4] = {1, 2, 3, 4};
      volatile int bad_dtype = 42;
      a[static_cast<std::size_t>(r)] =
          status_of([&] { c.allreduce(nullptr, x, 4, DTRAIN_FLOAT32, DTRAIN_SUM); }).first;
      b[static_cast<std::size_t>(r)] =
          status_of([&] { c.allreduce(x, x, 4, static_cast<dtrain_dtype_t>(bad_dtype), DTRAIN_SUM); }).first;
      c3[static_cast<std::size_t>(r)] = status_of([&] { c.broadcast(x, x, 4, DTRAIN_FLOAT32, 7); }).first;
      ok[static_cast<std::size_t>(r)] = status_of([&] { c.allreduce(x, x, 4, DTRAIN_FLOAT32, DTRAIN_SUM); }).first;
    });
    for (int r = 0; r < 2; ++r) {
      CHECK(errors[static_cast<std::size_t>(r)].empty());
      CHECK(a[static_cast<std::size_t>(r)] == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(b[static_cast<std::size_t>(r)] == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(c3[static_cast<std::size_t>(r)] == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(ok[static_cast<std::size_t>(r)] == DTRAIN_SUCCESS);
    }
  }

  TEST_CASE("a rank that destroys its communicator early: the others fail, not hang") {
    World w;
    w.size = 3;
    w.timeout = 20s;
    std::vector<dtrain_status_t> st(3, DTRAIN_SUCCESS);
    std::vector<std::string> text(3);
    no_errors(run_owned_ranks(w, [&](std::unique_ptr<Communicator>& c, int r) {
      c->barrier();
      if (r == 0) {
        c.reset();
        return;
      }
      auto res = status_of([&] { c->barrier(); });
      st[static_cast<std::size_t>(r)] = res.first;
      text[static_cast<std::size_t>(r)] = res.second;
    }));
    for (int r : {1, 2}) {
      CHECK_MESSAGE(st[static_cast<std::size_t>(r)] == DTRAIN_ERR_PEER, text[static_cast<std::size_t>(r)]);
      CHECK(text[static_cast<std::size_t>(r)].find("rank 0") != std::string::npos);
    }
  }
}
