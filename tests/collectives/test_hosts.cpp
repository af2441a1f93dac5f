// Communicator::with_hosts (hosts.cpp) over a CallbackStore (callback_store.cpp): which engine
// the discovered hosts give (shm within one host, tcp with one rank per host or when asked,
// hierarchical for several hosts with several ranks, in any numbering), and the store adapter's
// error mapping.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "c_store.hpp"
#include "callback_store.hpp"
#include "comm.hpp"
#include "ranks.hpp"

namespace dtrain::coll::test {
namespace {

// The engine each rank got, with hosts from host(r); allreduces once to check the engine works.
std::vector<std::string> engines(int n, const std::string& transport, const std::function<std::string(int)>& host) {
  CStore cstore(rdzv::make_memory_store());
  auto store = std::make_shared<CallbackStore>(cstore.c, "test");
  return on_threads(n, [&](int r) -> std::string {
    CommConfig cfg;
    cfg.rank = r;
    cfg.size = n;
    cfg.transport = transport;
    cfg.timeout = std::chrono::milliseconds(30000);
    cfg.advertise = "127.0.0.1";
    auto c = Communicator::with_hosts(cfg, store, host(r));
    std::int64_t x = r, y = 0;
    c->allreduce(&x, &y, 1, DTRAIN_INT64, DTRAIN_SUM);
    return y == n * (n - 1) / 2 ? c->engine_name() : "wrong sum";
  });
}

}  // namespace

TEST_SUITE("collectives::comm_hosts") {
  TEST_CASE("hosts discovered through the store pick the engine") {
    auto same = [](int) { return std::string("one"); };
    CHECK(engines(3, "auto", same) == std::vector<std::string>(3, "shm"));
    CHECK(engines(3, "tcp", same) == std::vector<std::string>(3, "tcp"));
    CHECK(engines(3, "auto", [](int r) { return "h" + std::to_string(r); }) == std::vector<std::string>(3, "tcp"));
    CHECK(engines(4, "auto", [](int r) { return r % 2 ? "b" : "a"; }) ==
          std::vector<std::string>(4, "hierarchical"));
    CHECK(engines(1, "auto", same) == std::vector<std::string>(1, "self"));
  }

  TEST_CASE("the store adapter reports callback failures with their message") {
    CStore cstore(rdzv::make_memory_store());
    CallbackStore s(cstore.c, "group 7");
    s.set("k", rdzv::as_bytes("v"));
    CHECK(rdzv::to_string(s.get("k", std::chrono::milliseconds(100))) == "v");
    CHECK(s.add("n", 5) == 5);
    CHECK(s.add("n", -2) == 3);
    CHECK(rdzv::to_string(s.compare_set("c", {}, rdzv::as_bytes("x"))) == "x");
    CHECK(rdzv::to_string(s.compare_set("c", rdzv::as_bytes("y"), rdzv::as_bytes("z"))) == "x");
    const std::string both[] = {"k", "c"}, missing[] = {"k", "nope"};
    CHECK(s.check(both));
    CHECK_FALSE(s.check(missing));
    CHECK_THROWS_AS(s.get("nope", std::chrono::milliseconds(50)), TimeoutError);
    CHECK_THROWS_AS(s.erase("k"), InternalError);
    cstore.fail_all = true;
    try {
      s.set("k", rdzv::as_bytes("v"));
      FAIL("set did not throw");
    } catch (const IoError& e) {
      CHECK(std::string(e.what()).find(CStore::kFailText) != std::string::npos);
      CHECK(std::string(e.what()).find("group 7") != std::string::npos);
    }
  }

  TEST_CASE("a barrier through the adapter") {
    CStore cstore(rdzv::make_memory_store());
    CallbackStore s(cstore.c, "");
    no_errors(on_threads(3, [&](int) { s.barrier("b", 3, std::chrono::milliseconds(10000)); }));
    CHECK_THROWS_AS(s.barrier("lonely", 2, std::chrono::milliseconds(100)), TimeoutError);
  }
}

}  // namespace dtrain::coll::test
