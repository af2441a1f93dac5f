// dtrain_comm_init_config at the C ABI, ranks as threads over a caller's store (an in-memory store
// behind dtrain_store_t callbacks, as a framework backend passes its own): collectives on the
// shared-memory engine, on TCP (config->transport) and across two fake hosts (config->host, ranks of a
// host not contiguous: the hierarchical engine); bad configurations refused naming the field; a
// failing or timing-out store callback reported with its message; dtrain_comm_set_timeout;
// dtrain_comm_abort from another thread ending the call in flight.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "c_ranks.hpp"
#include "dtrain/collectives.h"

namespace {

using dtrain::coll::test::CStore;
using dtrain::coll::test::no_errors;
using dtrain::coll::test::run_c_ranks;
using Setup = dtrain::coll::test::StoreWorld;

// The four collectives of 0.1 on a communicator of n ranks, against their known results.
std::string exercise(dtrain_comm_t comm, int r) {
  int rank = -1, n = 0;
  if (dtrain_comm_rank(comm, &rank) != DTRAIN_SUCCESS || dtrain_comm_size(comm, &n) != DTRAIN_SUCCESS)
    return dtrain_last_error();
  if (rank != r) return fmt::format("rank {} where {} was configured", rank, r);
  const std::size_t count = 3000;
  std::vector<double> a(count), out(count);
  for (std::size_t i = 0; i < count; ++i) a[i] = static_cast<double>(r + 1) * static_cast<double>(i % 7);
  if (dtrain_allreduce(comm, a.data(), out.data(), count, DTRAIN_FLOAT64, DTRAIN_SUM, nullptr) != DTRAIN_SUCCESS)
    return dtrain_last_error();
  const double ranks_sum = n * (n + 1) / 2.0;
  for (std::size_t i = 0; i < count; ++i)
    if (out[i] != ranks_sum * static_cast<double>(i % 7)) return fmt::format("allreduce: [{}] = {}", i, out[i]);
  std::vector<int> b(5, r == n - 1 ? 42 : 0);
  if (dtrain_broadcast(comm, b.data(), b.data(), 5, DTRAIN_INT32, n - 1, nullptr) != DTRAIN_SUCCESS)
    return dtrain_last_error();
  if (b != std::vector<int>(5, 42)) return "broadcast: wrong result";
  std::vector<int> mine(2, r), all(2 * static_cast<std::size_t>(n));
  if (dtrain_allgather(comm, mine.data(), all.data(), 2, DTRAIN_INT32, nullptr) != DTRAIN_SUCCESS)
    return dtrain_last_error();
  for (int q = 0; q < n; ++q)
    if (all[2 * static_cast<std::size_t>(q)] != q) return fmt::format("allgather: block {} wrong", q);
  std::vector<long long> rs(static_cast<std::size_t>(n), r + 1);
  long long got = 0;
  if (dtrain_reduce_scatter(comm, rs.data(), &got, 1, DTRAIN_INT64, DTRAIN_MAX, nullptr) != DTRAIN_SUCCESS)
    return dtrain_last_error();
  if (got != n) return fmt::format("reduce_scatter: {}", got);
  return dtrain_barrier(comm) == DTRAIN_SUCCESS ? "" : dtrain_last_error();
}

// Sets an environment variable for a scope (no rank threads run meanwhile).
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) { ::setenv(n, value, 1); }
  ~ScopedEnv() { ::unsetenv(name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace

TEST_SUITE("collectives::init_config") {
  TEST_CASE("the version code is the header's") { CHECK(dtrain_version_code() == DTRAIN_VERSION_CODE); }

  TEST_CASE("one host: shared memory, 1 to 3 ranks") {
    for (int n : {1, 2, 3}) {
      CAPTURE(n);
      Setup s;
      s.size = n;
      no_errors(run_c_ranks(s, exercise));
    }
  }

  TEST_CASE("tcp through config->transport") {
    Setup s;
    s.size = 3;
    s.transport = "tcp";
    no_errors(run_c_ranks(s, exercise));
  }

  TEST_CASE("two fake hosts, ranks of a host not contiguous: hierarchical") {
    Setup s;
    s.size = 5;
    s.host = [](int r) { return r % 2 == 0 ? "host-a" : "host-b"; };
    no_errors(run_c_ranks(s, exercise));
  }

  TEST_CASE("one rank per fake host: tcp") {
    Setup s;
    s.size = 3;
    static const char* const names[] = {"h0", "h1", "h2"};
    s.host = [](int r) { return names[r]; };
    no_errors(run_c_ranks(s, exercise));
  }

  TEST_CASE("the calls of 0.3 at the C ABI, on shm and tcp") {
    for (const char* transport : {static_cast<const char*>(nullptr), "tcp"}) {
      Setup s;
      s.size = 3;
      s.transport = transport;
      no_errors(run_c_ranks(s, [](dtrain_comm_t comm, int r) -> std::string {
        const int n = 3;
        auto ok = [](dtrain_status_t st) { return st == DTRAIN_SUCCESS; };
        dtrain_op_t half{};
        if (!ok(dtrain_redop_create_premul_sum(comm, 0.5, &half))) return dtrain_last_error();
        double x[2] = {2.0 * r, 1.0}, y[2] = {};
        if (!ok(dtrain_reduce(comm, x, y, 2, DTRAIN_FLOAT64, half, 1, nullptr))) return dtrain_last_error();
        if (r == 1 && (y[0] != 3.0 || y[1] != 1.5)) return fmt::format("reduce premul: {} {}", y[0], y[1]);
        if (!ok(dtrain_redop_destroy(comm, half))) return dtrain_last_error();
        if (dtrain_redop_destroy(comm, half) != DTRAIN_ERR_INVALID_ARGUMENT) return "destroyed twice";
        unsigned char flag = r == 2, any = 0;
        if (!ok(dtrain_allreduce(comm, &flag, &any, 1, DTRAIN_BOOL, DTRAIN_MAX, nullptr))) return dtrain_last_error();
        if (any != 1) return "bool max";
        short h[3] = {static_cast<short>(r + 1), -1, 0}, all[9] = {};
        if (!ok(dtrain_gather(comm, h, r == 0 ? all : nullptr, 3, DTRAIN_INT16, 0, nullptr))) return dtrain_last_error();
        if (r == 0 && (all[0] != 1 || all[3] != 2 || all[6] != 3 || all[7] != -1)) return "gather int16";
        int block[3] = {10, 20, 30}, got = 0;
        if (!ok(dtrain_scatter(comm, r == 2 ? block : nullptr, &got, 1, DTRAIN_INT32, 2, nullptr)))
          return dtrain_last_error();
        if (got != 10 * (r + 1)) return "scatter";
        long long a2a[3] = {r * 10 + 0, r * 10 + 1, r * 10 + 2}, back[3] = {};
        if (!ok(dtrain_alltoall(comm, a2a, back, 1, DTRAIN_INT64, nullptr))) return dtrain_last_error();
        for (int q = 0; q < n; ++q)
          if (back[q] != q * 10 + r) return "alltoall";
        size_t sc[3] = {1, 1, 1}, sd[3] = {0, 1, 2}, rc[3] = {1, 1, 1}, rd[3] = {2, 1, 0};
        if (!ok(dtrain_alltoallv(comm, a2a, sc, sd, back, rc, rd, DTRAIN_INT64, nullptr))) return dtrain_last_error();
        for (int q = 0; q < n; ++q)
          if (back[2 - q] != q * 10 + r) return "alltoallv";
        if (dtrain_alltoall(comm, a2a, a2a + 1, 1, DTRAIN_INT64, nullptr) != DTRAIN_ERR_INVALID_ARGUMENT)
          return "overlapping alltoall accepted";
        int msg = r, src = -1;
        if (r != 0 && !ok(dtrain_send(comm, &msg, 1, DTRAIN_INT32, 0, 7, nullptr))) return dtrain_last_error();
        if (r == 0)
          for (int k = 0; k < 2; ++k) {
            if (!ok(dtrain_recv_any(comm, &msg, 1, DTRAIN_INT32, 7, &src, nullptr))) return dtrain_last_error();
            if (msg != src || src < 1) return "recv_any";
          }
        return dtrain_barrier(comm) == DTRAIN_SUCCESS ? "" : dtrain_last_error();
      }));
    }
  }

  TEST_CASE("bad configurations are refused naming the field") {
    CStore store(dtrain::rdzv::make_memory_store());
    auto refused = [&](dtrain_config_t cfg, const char* field) {
      dtrain_comm_t comm = reinterpret_cast<dtrain_comm_t>(&store);  // must be reset to NULL
      CAPTURE(field);
      CHECK(dtrain_comm_init_config(&cfg, &comm) == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(comm == nullptr);
      CHECK(std::string(dtrain_last_error()).find(field) != std::string::npos);
    };
    dtrain_config_t good = DTRAIN_CONFIG_INITIALIZER;
    good.rank = 0;
    good.size = 1;
    good.store = &store.c;
    dtrain_config_t c = good;
    c.struct_size = offsetof(dtrain_config_t, store);
    refused(c, "struct_size");
    c = good;
    c.struct_size = 0;
    refused(c, "struct_size");
    c = good;
    c.size = 0;
    refused(c, "config->size");
    c = good;
    c.rank = 1;
    refused(c, "config->rank");
    c = good;
    c.rank = -1;
    refused(c, "config->rank");
    c = good;
    c.store = nullptr;
    refused(c, "config->store");
    dtrain_store_t no_cas = store.c;
    no_cas.compare_set = nullptr;
    c = good;
    c.store = &no_cas;
    refused(c, "compare_set");
    c = good;
    c.transport = "infiniband";
    refused(c, "config->transport");
    dtrain_comm_t comm = nullptr;
    CHECK(dtrain_comm_init_config(nullptr, &comm) == DTRAIN_ERR_INVALID_ARGUMENT);
    CHECK(dtrain_comm_init_config(&good, nullptr) == DTRAIN_ERR_INVALID_ARGUMENT);
  }

  TEST_CASE("only the first struct_size bytes are read") {
    CStore store(dtrain::rdzv::make_memory_store());
    dtrain_config_t c = DTRAIN_CONFIG_INITIALIZER;
    c.rank = 0;
    c.size = 1;
    c.store = &store.c;
    c.struct_size = offsetof(dtrain_config_t, store) + sizeof c.store;
    c.transport = "not read";  // past struct_size: an older caller's struct ends before it
    dtrain_comm_t comm = nullptr;
    REQUIRE(dtrain_comm_init_config(&c, &comm) == DTRAIN_SUCCESS);
    float x = 2, y = 0;
    CHECK(dtrain_allreduce(comm, &x, &y, 1, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr) == DTRAIN_SUCCESS);
    CHECK(y == 2);
    dtrain_comm_destroy(comm);
  }

  TEST_CASE("a failing store callback is reported with its message") {
    CStore store(dtrain::rdzv::make_memory_store());
    store.fail_all = true;
    dtrain_config_t c = DTRAIN_CONFIG_INITIALIZER;
    c.rank = 0;
    c.size = 2;
    c.store = &store.c;
    dtrain_comm_t comm = nullptr;
    CHECK(dtrain_comm_init_config(&c, &comm) == DTRAIN_ERR_PEER);
    CHECK(std::string(dtrain_last_error()).find(CStore::kFailText) != std::string::npos);
    CHECK(comm == nullptr);
    store.fail_all = false;
    store.get_timeouts = true;
    CHECK(dtrain_comm_init_config(&c, &comm) == DTRAIN_ERR_TIMEOUT);
    CHECK(std::string(dtrain_last_error()).find("the test store's get timed out") != std::string::npos);
    CHECK(std::string(dtrain_last_error()).find("rank 1") != std::string::npos);
  }

  TEST_CASE("timeouts: NaN and -inf refused, inf and huge ones no practical deadline, from config and env") {
    CStore store(dtrain::rdzv::make_memory_store());
    store.get_timeouts = true;  // rank 1 never publishes: the message gives the deadline
    dtrain_config_t c = DTRAIN_CONFIG_INITIALIZER;
    c.rank = 0;
    c.size = 2;
    c.store = &store.c;
    auto init_error = [&](double timeout_s, dtrain_status_t expected) {
      c.timeout_s = timeout_s;
      dtrain_comm_t comm = nullptr;
      CHECK(dtrain_comm_init_config(&c, &comm) == expected);
      CHECK(comm == nullptr);
      return std::string(dtrain_last_error());
    };
    CHECK(init_error(std::nan(""), DTRAIN_ERR_INVALID_ARGUMENT).find("config->timeout_s is nan") != std::string::npos);
    CHECK(init_error(-HUGE_VAL, DTRAIN_ERR_INVALID_ARGUMENT).find("config->timeout_s is -inf") != std::string::npos);
    for (double huge : {HUGE_VAL, 1e300, 2e9}) {
      CAPTURE(huge);
      const std::string m = init_error(huge, DTRAIN_ERR_TIMEOUT);
      CHECK_MESSAGE(m.find("within 1e+09 s") != std::string::npos, m);
    }
    CHECK(init_error(1.5, DTRAIN_ERR_TIMEOUT).find("within 1.5 s") != std::string::npos);
    for (const char* huge : {"inf", "1e400"}) {
      ScopedEnv env("DTRAIN_COLL_TIMEOUT_S", huge);
      const std::string m = init_error(0, DTRAIN_ERR_TIMEOUT);
      CHECK_MESSAGE(m.find("within 1e+09 s") != std::string::npos, m);
    }
    {
      ScopedEnv env("DTRAIN_COLL_TIMEOUT_S", "nan");
      CHECK(init_error(0, DTRAIN_ERR_CONFIG).find("DTRAIN_COLL_TIMEOUT_S=nan") != std::string::npos);
    }
    store.get_timeouts = false;
    c.size = 1;
    c.timeout_s = 0;
    dtrain_comm_t comm = nullptr;
    REQUIRE(dtrain_comm_init_config(&c, &comm) == DTRAIN_SUCCESS);
    CHECK(dtrain_comm_set_timeout(comm, std::nan("")) == DTRAIN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(dtrain_last_error()).find("timeout_s is nan") != std::string::npos);
    CHECK(dtrain_comm_set_timeout(comm, -HUGE_VAL) == DTRAIN_ERR_INVALID_ARGUMENT);
    CHECK(dtrain_comm_set_timeout(comm, HUGE_VAL) == DTRAIN_SUCCESS);
    float x = 1, y = 0;
    CHECK(dtrain_allreduce(comm, &x, &y, 1, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr) == DTRAIN_SUCCESS);
    CHECK(y == 1);
    dtrain_comm_destroy(comm);
  }

  TEST_CASE("a junk value under the library's store keys is a peer error naming the key and what was expected") {
    std::shared_ptr<dtrain::rdzv::Store> base = dtrain::rdzv::make_memory_store();
    CStore store(base);
    dtrain_config_t c = DTRAIN_CONFIG_INITIALIZER;
    c.size = 2;
    c.store = &store.c;
    c.transport = "tcp";
    auto refused = [&](int rank) {
      c.rank = rank;
      dtrain_comm_t comm = nullptr;
      CHECK(dtrain_comm_init_config(&c, &comm) == DTRAIN_ERR_PEER);
      CHECK(comm == nullptr);
      return std::string(dtrain_last_error());
    };
    SUBCASE("a rank's TCP address") {
      base->set("coll/1/host/1", dtrain::rdzv::as_bytes("elsewhere"));
      base->set("coll/1/tcp/1", dtrain::rdzv::as_bytes("junk\x1b[2J"));
      const std::string m = refused(0);
      CHECK_MESSAGE(m.find("store key 'coll/1/tcp/1' holds \"junk\\x1b[2J\" (8 bytes), not rank 1's address") !=
                        std::string::npos, m);
    }
    SUBCASE("an address with a port out of range") {
      base->set("coll/1/host/1", dtrain::rdzv::as_bytes("elsewhere"));
      base->set("coll/1/tcp/1", dtrain::rdzv::as_bytes("127.0.0.1 70000 h"));
      CHECK(refused(0).find("store key 'coll/1/tcp/1'") != std::string::npos);
    }
    SUBCASE("the mesh secret") {
      base->set("coll/1/host/0", dtrain::rdzv::as_bytes("elsewhere"));
      base->set("coll/1/tcp/0", dtrain::rdzv::as_bytes("127.0.0.1 9 h"));
      base->set("coll/1/tcp/secret", dtrain::rdzv::as_bytes("short"));
      const std::string m = refused(1);
      CHECK_MESSAGE(m.find("store key 'coll/1/tcp/secret' holds \"short\" (5 bytes), not the 32-byte mesh secret") !=
                        std::string::npos, m);
    }
    SUBCASE("the communicator counter") {
      base->set("coll/instance/0", dtrain::rdzv::as_bytes("junk"));
      CHECK(refused(0).find("coll/instance/0") != std::string::npos);
    }
  }

  TEST_CASE("a junk local rank under the hierarchical engine's keys is a peer error, not a wrong leader set") {
    // rank 2's local rank reaches the store as "junk" (a set that rewrites it: rank 2 itself writes it)
    CStore inner(dtrain::rdzv::make_memory_store());
    dtrain_store_t tampered = inner.c;
    tampered.set = [](void* ctx, const char* key, const void* value, size_t len, dtrain_store_error_fn error,
                      void* ectx) {
      const bool junk = std::string_view(key).ends_with("/lr/2");
      return static_cast<CStore*>(ctx)->c.set(ctx, key, junk ? "junk" : value, junk ? 4 : len, error, ectx);
    };
    auto errors = dtrain::coll::test::on_threads(3, [&](int r) -> std::string {
      dtrain_config_t c = DTRAIN_CONFIG_INITIALIZER;
      c.rank = r;
      c.size = 3;
      c.store = &tampered;
      c.host = r < 2 ? "host-a" : "host-b";
      c.advertise = "127.0.0.1";
      c.timeout_s = 60;
      dtrain_comm_t comm = nullptr;
      const dtrain_status_t st = dtrain_comm_init_config(&c, &comm);
      if (st == DTRAIN_SUCCESS) dtrain_comm_destroy(comm);
      const std::string m = st == DTRAIN_SUCCESS ? "" : dtrain_last_error();
      if (st != DTRAIN_ERR_PEER || m.find("lr/2' holds \"junk\" (4 bytes), not rank 2's local rank") == std::string::npos)
        return fmt::format("status {}: {}", static_cast<int>(st), m);
      return "";
    });
    no_errors(errors);
  }

  TEST_CASE("set_timeout: a shorter deadline, then the initial one restored") {
    Setup s;
    s.size = 2;
    s.timeout_s = 60;
    std::atomic<int> stage{0};
    auto advance = [&](int to) {
      stage = to;
      stage.notify_all();
    };
    auto errors = run_c_ranks(s, [&](dtrain_comm_t comm, int r) -> std::string {
      float x = 1, y = 0;
      if (r == 0) {
        if (dtrain_comm_set_timeout(comm, 0.3) != DTRAIN_SUCCESS) return dtrain_last_error();
        if (dtrain_comm_set_timeout(comm, 0) != DTRAIN_SUCCESS) return dtrain_last_error();
        advance(1);
        if (dtrain_allreduce(comm, &x, &y, 1, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr) != DTRAIN_SUCCESS)
          return std::string("restored deadline: ") + dtrain_last_error();
        // 0.5 s: rank 1 never calls this one.
        if (dtrain_comm_set_timeout(comm, 0.5) != DTRAIN_SUCCESS) return dtrain_last_error();
        const auto t0 = std::chrono::steady_clock::now();
        const dtrain_status_t st = dtrain_allreduce(comm, &x, &y, 1, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        advance(2);
        if (st != DTRAIN_ERR_TIMEOUT) return fmt::format("short deadline: status {}", static_cast<int>(st));
        if (std::string(dtrain_last_error()).find("after 0.5 s") == std::string::npos)
          return std::string("the message does not give the deadline set: ") + dtrain_last_error();
        if (took > 20) return fmt::format("short deadline: took {} s", took);
        return "";
      }
      stage.wait(0);
      // Time itself is under test: rank 1 joins rank 0's call twice as late as the 0.3 s deadline
      // that was restored away.
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      if (dtrain_allreduce(comm, &x, &y, 1, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr) != DTRAIN_SUCCESS)
        return dtrain_last_error();
      for (int v = stage.load(); v < 2; v = stage.load()) stage.wait(v);
      return "";
    });
    no_errors(errors);
    CHECK(dtrain_comm_set_timeout(nullptr, 1) == DTRAIN_ERR_INVALID_ARGUMENT);
  }

  TEST_CASE("abort from another thread ends the call in flight, on shm, tcp and hierarchical") {
    for (const char* layout : {"shm", "tcp", "hierarchical"}) {
      CAPTURE(layout);
      Setup s;
      s.size = std::string(layout) == "hierarchical" ? 4 : 2;
      s.transport = std::string(layout) == "tcp" ? "tcp" : nullptr;
      if (std::string(layout) == "hierarchical") s.host = [](int r) { return r % 2 == 0 ? "host-a" : "host-b"; };
      s.timeout_s = 60;
      std::atomic<bool> done{false};
      auto errors = run_c_ranks(s, [&](dtrain_comm_t comm, int r) -> std::string {
        if (r != 0) {  // alive, never calling: rank 0's allreduce waits for them
          while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return "";
        }
        std::thread aborter([comm] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          dtrain_comm_abort(comm, "the test gave up");
        });
        std::vector<float> x(1000, 1.0f);
        const auto t0 = std::chrono::steady_clock::now();
        const dtrain_status_t st = dtrain_allreduce(comm, x.data(), x.data(), x.size(), DTRAIN_FLOAT32, DTRAIN_SUM,
                                                    nullptr);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::string text = dtrain_last_error();
        aborter.join();
        const dtrain_status_t later = dtrain_barrier(comm);
        const std::string later_text = dtrain_last_error();
        done = true;
        if (st != DTRAIN_ERR_ABORTED) return fmt::format("in flight: status {}: {}", static_cast<int>(st), text);
        if (text.find("the test gave up") == std::string::npos) return "in flight: no reason in: " + text;
        if (took > 20) return fmt::format("in flight: took {} s", took);
        if (later != DTRAIN_ERR_ABORTED || later_text.find("the test gave up") == std::string::npos)
          return fmt::format("later call: status {}: {}", static_cast<int>(later), later_text);
        return "";
      });
      no_errors(errors);
    }
    CHECK(dtrain_comm_abort(nullptr, "x") == DTRAIN_ERR_INVALID_ARGUMENT);
  }
}
