// Lease against a real etcd: granted and revoked, kept past its TTL, and a renewal that fails
// reported once armed.
#include <doctest/doctest.h>

#include <future>
#include <thread>

#include "etcd_server.hpp"
#include "lease.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;

TEST_SUITE("etcd::lease") {
  TEST_CASE("a key under the lease lives past the TTL while the keeper renews it, and goes with end()") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    Lease lease(c, 200ms, 1s);  // a TTL of 2 s, the least a lease gets
    CHECK(lease.id() == 0);
    lease.start();
    REQUIRE(lease.id() != 0);
    std::string key = etcdtest::unique_prefix() + "node";
    c.put(key, "x", lease.id());
    std::this_thread::sleep_for(2500ms);  // time itself is under test: past the TTL only renewals hold the key
    CHECK(c.range(key).kvs.size() == 1);
    lease.end();
    CHECK(lease.id() == 0);
    CHECK(c.range(key).kvs.empty());  // revoked: at once, not at the TTL
    lease.end();                      // idempotent
  }

  TEST_CASE("armed, a renewal that fails is the rendezvous lost, once; disarmed, it is not reported") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    Options o = etcd.options();
    o.connect_timeout = o.request_timeout = 500ms;
    Client c(o);
    Lease lease(c, 50ms, 2s);
    lease.start();
    std::promise<std::string> lost;
    int calls = 0;
    lease.arm([&](const std::string& why) {
      if (++calls == 1) lost.set_value(why);
    });
    etcd.kill();
    auto got = lost.get_future();
    REQUIRE(got.wait_for(30s) == std::future_status::ready);
    CHECK(got.get().find("renewing this node's lease failed") != std::string::npos);
    lease.disarm();
    lease.end();  // the revoke fails too: logged, not thrown
    CHECK(calls == 1);
  }
}
