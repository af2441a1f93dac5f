// The C++ wrapper's calls of 0.3 (collectives.hpp) over the shared library, ranks as threads through
// a caller's store: the config constructor, set_timeout, premul_sum, reduce, gather, scatter,
// alltoall, recv_any with spans (bool and int16 elements included), and errors as coll_error.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "c_store.hpp"
#include "dtrain/collectives.hpp"
#include "ranks.hpp"

TEST_SUITE("collectives::wrapper") {
  TEST_CASE("the 0.3 calls through the wrapper") {
    dtrain::coll::test::CStore store(dtrain::rdzv::make_memory_store());
    const int n = 3;
    dtrain::coll::test::no_errors(dtrain::coll::test::on_threads(n, [&](int r) {
      std::string bad;
      dtrain_config_t cfg = DTRAIN_CONFIG_INITIALIZER;
      cfg.rank = r;
      cfg.size = n;
      cfg.store = &store.c;
      dtrain::Communicator c(cfg);
      c.set_timeout(30);
      const dtrain_op_t third = c.premul_sum(1.0 / 3);
      std::vector<double> g(4, 3.0 * (r + 1)), out(4);
      c.allreduce(std::span<const double>(g), std::span<double>(out), third);
      if (out[0] != 6.0) bad = "premul allreduce";
      c.destroy_op(third);
      std::vector<std::int16_t> h(2, static_cast<std::int16_t>(r + 1)), sum(2);
      c.reduce(std::span<const std::int16_t>(h), std::span<std::int16_t>(sum), 0);
      if (r == 0 && sum[0] != 6) bad = "reduce int16";
      bool mine[1] = {r == 1}, all[3] = {};
      c.gather(std::span<const bool>(mine), r == 2 ? std::span<bool>(all) : std::span<bool>(), 2);
      if (r == 2 && (all[0] || !all[1] || all[2])) bad = "gather bool";
      std::vector<int> blocks = {7, 8, 9}, one(1);
      c.scatter(r == 1 ? std::span<const int>(blocks) : std::span<const int>(), std::span<int>(one), 1);
      if (one[0] != 7 + r) bad = "scatter";
      std::vector<int> to = {r, r, r}, from(3);
      c.alltoall(std::span<const int>(to), std::span<int>(from));
      if (from != std::vector<int>({0, 1, 2})) bad = "alltoall";
      if (r > 0) {
        int v[1] = {r};
        c.send(std::span<int>(v), 0, 4);
      } else {
        int v[1] = {};
        for (int k = 0; k < 2; ++k)
          if (c.recv_any(std::span<int>(v), 4) != v[0]) bad = "recv_any";
      }
      try {
        c.alltoall(std::span<const int>(to), std::span<int>(from.data(), 2));
        bad = "alltoall with unequal spans accepted";
      } catch (const dtrain::coll_error& e) {
        if (e.status() != DTRAIN_ERR_INVALID_ARGUMENT) bad = "wrong status";
      }
      c.barrier();
      return bad;
    }));
  }
}
