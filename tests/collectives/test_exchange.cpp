// reduce, gather, scatter, alltoall and alltoallv (exchange.cpp) with ranks as threads on every
// CPU engine (self, shm, tcp, hierarchical through two hosts of ranks): results against the known
// values, the in-place forms, mismatched calls (op, root, uneven splits that disagree) reported as
// DTRAIN_ERR_MISMATCH naming both ranks, and a peer that left reported, not hung on.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.hpp"

namespace {

std::string where(const World& w) { return fmt::format("size {} transport {} local_size {}", w.size, w.transport, w.local_size); }

// Element i of rank r's contribution.
std::int64_t val(int r, std::size_t i) { return static_cast<std::int64_t>(r) * 1000 + static_cast<std::int64_t>(i % 997); }

// Each rank runs every op once, with counts around the engines' inline and slot limits.
std::string exercise(Communicator& c, int r) {
  const int n = c.size();
  const auto un = static_cast<std::size_t>(n);
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{3000}, std::size_t{300000}}) {
    for (int root : {0, n - 1}) {
      // reduce (sum of int64), out of place and in place at the root
      std::vector<std::int64_t> send(count), recv(count, -1);
      for (std::size_t i = 0; i < count; ++i) send[i] = val(r, i);
      const bool in_place = count == 5;
      c.reduce(send.data(), in_place ? send.data() : (r == root ? recv.data() : nullptr), count, DTRAIN_INT64,
               DTRAIN_SUM, root);
      if (r == root)
        for (std::size_t i = 0; i < count; ++i) {
          std::int64_t want = 0;
          for (int q = 0; q < n; ++q) want += val(q, i);
          if ((in_place ? send[i] : recv[i]) != want) return fmt::format("reduce count {} root {}: [{}]", count, root, i);
        }
      // gather, the root in place for count 5
      std::vector<std::int64_t> all(count * un, -1), mine(count);
      for (std::size_t i = 0; i < count; ++i) mine[i] = val(r, i);
      const std::int64_t* src = mine.data();
      if (in_place && r == root) {
        std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(count * static_cast<std::size_t>(r)));
        src = all.data() + count * static_cast<std::size_t>(r);
      }
      c.gather(src, r == root ? all.data() : nullptr, count, DTRAIN_INT64, root);
      if (r == root)
        for (int q = 0; q < n; ++q)
          for (std::size_t i = 0; i < count; ++i)
            if (all[static_cast<std::size_t>(q) * count + i] != val(q, i))
              return fmt::format("gather count {} root {}: block {} [{}]", count, root, q, i);
      // scatter, the root in place for count 5
      std::vector<std::int64_t> whole(count * un), part(count, -1);
      if (r == root)
        for (int q = 0; q < n; ++q)
          for (std::size_t i = 0; i < count; ++i) whole[static_cast<std::size_t>(q) * count + i] = val(q, i) + 7;
      std::int64_t* dst = in_place && r == root ? whole.data() + count * static_cast<std::size_t>(r) : part.data();
      c.scatter(r == root ? whole.data() : nullptr, dst, count, DTRAIN_INT64, root);
      for (std::size_t i = 0; i < count; ++i)
        if (dst[i] != val(r, i) + 7) return fmt::format("scatter count {} root {}: [{}]", count, root, i);
    }
    // alltoall: block q of rank r's send is (r, q, i); rank q gets it as its block r.
    std::vector<std::int32_t> a(count * un), b(count * un, -1);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < count; ++i)
        a[static_cast<std::size_t>(q) * count + i] = r * 1000000 + q * 10000 + static_cast<int>(i % 9999);
    c.alltoall(a.data(), b.data(), count, DTRAIN_INT32);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < count; ++i)
        if (b[static_cast<std::size_t>(q) * count + i] != q * 1000000 + r * 10000 + static_cast<int>(i % 9999))
          return fmt::format("alltoall count {}: block {} [{}]", count, q, i);
  }
  // alltoallv: rank r sends (r + q) % 3 * 7 + q elements to rank q, packed in reverse rank order.
  auto len = [](int from, int to) { return static_cast<std::size_t>((from + to) % 3 * 7 + to + from); };
  std::vector<std::size_t> sc(un), sd(un), rc(un), rd(un);
  std::size_t off = 0;
  for (int q = n - 1; q >= 0; --q) {
    sc[static_cast<std::size_t>(q)] = len(r, q);
    sd[static_cast<std::size_t>(q)] = off;
    off += len(r, q);
  }
  std::vector<double> sv(off);
  for (int q = 0; q < n; ++q)
    for (std::size_t i = 0; i < sc[static_cast<std::size_t>(q)]; ++i)
      sv[sd[static_cast<std::size_t>(q)] + i] = r * 100 + q + static_cast<double>(i) / 1000;
  off = 3;  // a gap before the first block
  for (int q = 0; q < n; ++q) {
    rc[static_cast<std::size_t>(q)] = len(q, r);
    rd[static_cast<std::size_t>(q)] = off;
    off += len(q, r) + 1;
  }
  std::vector<double> rv(off, -1);
  c.alltoallv(sv.data(), sc.data(), sd.data(), rv.data(), rc.data(), rd.data(), DTRAIN_FLOAT64);
  for (int q = 0; q < n; ++q)
    for (std::size_t i = 0; i < rc[static_cast<std::size_t>(q)]; ++i)
      if (rv[rd[static_cast<std::size_t>(q)] + i] != q * 100 + r + static_cast<double>(i) / 1000)
        return fmt::format("alltoallv: from {} [{}]", q, i);
  if (rv[0] != -1) return "alltoallv wrote into the gap";
  return "";
}

}  // namespace

TEST_SUITE("collectives::exchange") {
  TEST_CASE("every op on every engine, 1 to 3 ranks, against the known results") {
    for (int n : {1, 2, 3, 4})
      for (const World& w : engine_worlds(n)) {
        CAPTURE(where(w));
        std::vector<std::string> wrong(static_cast<std::size_t>(n));
        auto errors = run_ranks(w, [&](Communicator& c, int r) { wrong[static_cast<std::size_t>(r)] = exercise(c, r); });
        for (int r = 0; r < n; ++r) {
          CAPTURE(r);
          CHECK(errors[static_cast<std::size_t>(r)] == "");
          CHECK(wrong[static_cast<std::size_t>(r)] == "");
        }
      }
  }

  TEST_CASE("mismatched calls are reported on the ranks that meet them, naming both") {
    std::vector<World> all = engine_worlds(3);
    all.push_back(engine_worlds(4).back());
    for (const World& base : all) {
      for (int variant = 0; variant < 4; ++variant) {
        World w = base;
        w.timeout = 20s;
        CAPTURE(where(w));
        CAPTURE(variant);
        const auto un = static_cast<std::size_t>(w.size);
        std::vector<std::pair<dtrain_status_t, std::string>> got(un);
        std::vector<dtrain_status_t> after(un);
        auto errors = run_ranks(w, [&](Communicator& c, int r) {
          std::vector<float> a(40, 1.0f), b(40);
          got[static_cast<std::size_t>(r)] = status_of([&] {
            switch (variant) {
              case 0: c.gather(a.data(), b.data(), 4, DTRAIN_FLOAT32, r == 2 ? 1 : 0); break;
              case 1:
                if (r == 1) c.scatter(a.data(), b.data(), 4, DTRAIN_FLOAT32, 0);
                else c.gather(a.data(), b.data(), 4, DTRAIN_FLOAT32, 0);
                break;
              case 2: c.alltoall(a.data(), b.data(), r == 0 ? 3 : 2, DTRAIN_FLOAT32); break;
              case 3: {  // rank 2 expects one element more from rank 0 than rank 0 sends it
                std::vector<std::size_t> sc(un, 2), rc(un, 2), d(un), rd(un);
                for (std::size_t q = 0; q < un; ++q) {
                  d[q] = 2 * q;
                  rd[q] = 3 * q;
                }
                if (r == 2) rc[0] = 3;
                c.alltoallv(a.data(), sc.data(), d.data(), b.data(), rc.data(), rd.data(), DTRAIN_FLOAT32);
                break;
              }
            }
          });
          after[static_cast<std::size_t>(r)] = status_of([&] { c.barrier(); }).first;
        });
        int mismatches = 0;
        for (int r = 0; r < w.size; ++r) {
          CAPTURE(r);
          CHECK(errors[static_cast<std::size_t>(r)] == "");
          const auto& [st, text] = got[static_cast<std::size_t>(r)];
          // A sender whose message was buffered may return before its receiver meets the mismatch; its
          // next call then fails. No rank hangs, and every rank fails by the next call.
          CHECK_MESSAGE((st != DTRAIN_SUCCESS || after[static_cast<std::size_t>(r)] != DTRAIN_SUCCESS), text);
          if (st == DTRAIN_ERR_MISMATCH) {
            ++mismatches;
            CHECK_MESSAGE(text.find("mismatched") != std::string::npos, text);
          } else if (st != DTRAIN_SUCCESS) {  // told of the failure by the rank that met it
            CHECK_MESSAGE(st == DTRAIN_ERR_PEER, text);
          }
        }
        CHECK(mismatches >= 1);
      }
    }
  }

  TEST_CASE("the mismatch message names both calls") {
    World w;
    w.size = 2;
    w.timeout = 20s;
    std::vector<std::string> text(2);
    run_ranks(w, [&](Communicator& c, int r) {
      float a[4] = {}, b[8] = {};
      text[static_cast<std::size_t>(r)] = status_of([&] {
        if (r == 0) c.gather(a, b, 4, DTRAIN_FLOAT32, 0);
        else c.reduce(a, b, 4, DTRAIN_FLOAT32, DTRAIN_SUM, 0);
      }).second;
    });
    const std::string& t = text[0].find("mismatched") != std::string::npos ? text[0] : text[1];
    CHECK_MESSAGE(t.find("gather(sendcount 4, float32, root 0)") != std::string::npos, t);
    CHECK_MESSAGE(t.find("reduce(count 4, float32, sum, root 0)") != std::string::npos, t);
  }

  TEST_CASE("a peer that left is reported, not waited for") {
    std::vector<World> all = engine_worlds(3);
    all.push_back(engine_worlds(4).back());
    for (const World& base : all) {
      World w = base;
      w.timeout = 60s;
      CAPTURE(where(w));
      std::vector<std::pair<dtrain_status_t, std::string>> got(static_cast<std::size_t>(w.size));
      const auto t0 = std::chrono::steady_clock::now();
      auto errors = run_ranks(w, [&](Communicator& c, int r) {
        std::vector<std::int32_t> a(300, r), b(900);
        c.barrier();
        if (r == 2) return;  // leaves: its communicator is destroyed
        got[static_cast<std::size_t>(r)] = status_of([&] { c.gather(a.data(), b.data(), 300, DTRAIN_INT32, 2); });
      });
      CHECK(std::chrono::steady_clock::now() - t0 < 40s);
      for (int r = 0; r < w.size; ++r) {
        if (r == 2) continue;
        CAPTURE(r);
        CHECK(errors[static_cast<std::size_t>(r)] == "");
        const auto& [st, text] = got[static_cast<std::size_t>(r)];
        CHECK_MESSAGE(st == DTRAIN_ERR_PEER, text);
        CHECK_MESSAGE(text.find("rank 2") != std::string::npos, text);
      }
    }
  }

  TEST_CASE("a message sent before gather, scatter or alltoall is received after it") {
    for (const World& w : {engine_worlds(3)[0], engine_worlds(3)[1], engine_worlds(4)[2]}) {
      CAPTURE(where(w));
      std::vector<std::string> wrong(static_cast<std::size_t>(w.size));
      auto errors = run_ranks(w, [&](Communicator& c, int r) {
        const int n = c.size();
        std::string& bad = wrong[static_cast<std::size_t>(r)];
        std::vector<int> msg(100, r), got(100);
        // Every rank sends one message to each other rank first (two tags), then the collectives.
        for (int q = 0; q < n; ++q) {
          if (q == r) continue;
          P2pArgs a;
          a.src = msg.data();
          a.count = q % 2 ? 100 : 3;
          a.dtype = DTRAIN_INT32;
          a.peer = q;
          a.tag = 10 + q;
          c.sendrecv(&a, nullptr);
        }
        std::vector<int> one(2, r), all(2 * static_cast<std::size_t>(n));
        c.gather(one.data(), all.data(), 2, DTRAIN_INT32, 0);
        c.scatter(all.data(), one.data(), 2, DTRAIN_INT32, 0);
        std::vector<int> to(static_cast<std::size_t>(n), r), from(static_cast<std::size_t>(n));
        c.alltoall(to.data(), from.data(), 1, DTRAIN_INT32);
        for (int q = 0; q < n; ++q)
          if (from[static_cast<std::size_t>(q)] != q) bad = "alltoall";
        for (int q = n - 1; q >= 0; --q) {  // the earlier messages, in another order
          if (q == r) continue;
          P2pArgs a;
          a.dst = got.data();
          a.count = r % 2 ? 100 : 3;
          a.dtype = DTRAIN_INT32;
          a.peer = q;
          a.tag = 10 + r;
          c.sendrecv(nullptr, &a);
          if (got[0] != q || got[a.count - 1] != q) bad = fmt::format("message from {}", q);
        }
        c.barrier();
      });
      for (int r = 0; r < w.size; ++r) {
        CAPTURE(r);
        CHECK(errors[static_cast<std::size_t>(r)] == "");
        CHECK(wrong[static_cast<std::size_t>(r)] == "");
      }
    }
  }

  TEST_CASE("bad arguments are refused before anything is sent") {
    World w;
    w.size = 1;
    run_ranks(w, [&](Communicator& c, int) {
      float a[2] = {};
      CHECK(status_of([&] { c.gather(a, a, 1, DTRAIN_FLOAT32, 1); }).first == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(status_of([&] { c.scatter(a, nullptr, 1, DTRAIN_FLOAT32, 0); }).first == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(status_of([&] { c.reduce(a, a, 1, DTRAIN_FLOAT32, DTRAIN_SUM, -1); }).first == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(status_of([&] { c.alltoallv(a, nullptr, nullptr, a, nullptr, nullptr, DTRAIN_FLOAT32); }).first ==
            DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(status_of([&] { c.gather(a, a, 1, static_cast<dtrain_dtype_t>(42), 0); }).first ==
            DTRAIN_ERR_INVALID_ARGUMENT);
      c.barrier();  // still usable
    });
  }
}
