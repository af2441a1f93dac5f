// Client against a real etcd: key-value calls, transactions, leases, and an etcd killed under it
// (without an etcd: test_client_offline.cpp).
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "client.hpp"
#include "dtrain/common/errors.hpp"
#include "etcd_server.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;
using etcdtest::EtcdServer;
using etcdtest::seconds_since;
using Clock = std::chrono::steady_clock;

TEST_SUITE("etcd::client") {
  TEST_CASE("put, range and prefix ranges, binary keys and values, a 1 MiB value") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    auto p = etcdtest::unique_prefix();
    std::int64_t r1 = c.put(p + "a", "1");
    std::int64_t r2 = c.put(p + "b", "2");
    CHECK(r2 > r1);
    c.put(p + "c", "3");
    c.put(p.substr(0, p.size() - 1) + "x", "outside");  // next to the prefix, not in it

    auto one = c.range(p + "a");
    REQUIRE(one.kvs.size() == 1);
    CHECK(one.kvs[0].key == p + "a");
    CHECK(one.kvs[0].value == "1");
    CHECK(one.kvs[0].mod_revision == r1);
    CHECK(one.kvs[0].create_revision == r1);
    CHECK(one.kvs[0].version == 1);
    CHECK(one.revision >= r2);

    auto all = c.range_prefix(p);
    REQUIRE(all.kvs.size() == 3);
    CHECK(all.count == 3);
    CHECK(all.kvs[0].value == "1");
    CHECK(all.kvs[2].key == p + "c");
    CHECK(c.range(p + "a", p + "c").kvs.size() == 2);  // [a, c)

    auto none = c.range(p + "missing");
    CHECK(none.kvs.empty());
    CHECK(none.revision >= r2);

    std::string key = p + std::string("bin\0\xff\x01", 6), value("\0\x80\xfe\n", 4);
    c.put(key, value);
    CHECK(c.range(key).kvs.at(0).value == value);
    c.put(p + "empty", "");
    auto e = c.range(p + "empty");
    REQUIRE(e.kvs.size() == 1);
    CHECK(e.kvs[0].value.empty());

    std::string big(1u << 20, 'v');
    big[12345] = '\0';
    c.put(p + "big", big);
    CHECK(c.range(p + "big").kvs.at(0).value == big);
    CHECK(c.local_address() == "127.0.0.1");
  }

  TEST_CASE("erase one key, a missing key, a prefix") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    auto p = etcdtest::unique_prefix();
    for (const char* k : {"a", "b", "c"}) c.put(p + k, k);
    CHECK(c.erase(p + "a") == 1);
    CHECK(c.erase(p + "a") == 0);
    CHECK(c.range(p + "a").kvs.empty());
    CHECK(c.erase(p, prefix_end(p)) == 2);
    CHECK(c.range_prefix(p).kvs.empty());
  }

  TEST_CASE("transactions take the branch their compares choose") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    auto p = etcdtest::unique_prefix();
    auto k = p + "k";
    Compare missing{k, Compare::Target::create, Compare::Result::equal, 0, {}};
    auto first = c.txn({missing}, {Op::put(k, "mine"), Op::range(k)}, {Op::range(k)});
    CHECK(first.succeeded);
    REQUIRE(first.ranges.size() == 1);  // the range of the success branch, after its put
    CHECK(first.ranges[0].kvs.at(0).value == "mine");
    CHECK(first.revision > 0);

    auto second = c.txn({missing}, {Op::put(k, "theirs")}, {Op::range(k)});
    CHECK_FALSE(second.succeeded);
    REQUIRE(second.ranges.size() == 1);
    CHECK(second.ranges[0].kvs.at(0).value == "mine");
    CHECK(second.revision == first.revision);  // nothing was written

    Compare is_mine{k, Compare::Target::value, Compare::Result::equal, 0, "mine"};
    Compare newer{k, Compare::Target::mod, Compare::Result::greater, first.revision, {}};
    CHECK(c.txn({is_mine}, {Op::put(k, "v2")}).succeeded);
    CHECK(c.txn({newer, Compare{k, Compare::Target::version, Compare::Result::equal, 2, {}}},
                {Op::erase(k)}).succeeded);
    CHECK(c.range(k).kvs.empty());
    // a value compare on a missing key fails (etcd's rule)
    CHECK_FALSE(c.txn({Compare{k, Compare::Target::value, Compare::Result::equal, 0, ""}}, {}).succeeded);
  }

  TEST_CASE("a lease holds its keys while kept alive; expiry and revoke delete them") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    auto p = etcdtest::unique_prefix();
    std::int64_t lease = c.lease_grant(2s);
    CHECK(lease != 0);
    c.put(p + "alive", "x", lease);
    CHECK(c.range(p + "alive").kvs.at(0).lease == lease);
    for (int i = 0; i < 6; ++i) {  // 3 s, past the 2 s TTL
      c.lease_keepalive(lease);
      std::this_thread::sleep_for(500ms);
    }
    CHECK(c.range(p + "alive").kvs.size() == 1);

    auto t0 = Clock::now();  // no more keepalives: etcd deletes the key once the TTL passes
    while (!c.range(p + "alive").kvs.empty() && seconds_since(t0) < 15) std::this_thread::sleep_for(100ms);
    CHECK(c.range(p + "alive").kvs.empty());
    CHECK(seconds_since(t0) >= 1.0);
    CHECK_THROWS_WITH_AS(c.lease_keepalive(lease), doctest::Contains("has expired"), dtrain::IoError);
    CHECK_THROWS_WITH_AS(c.put(p + "late", "x", lease), doctest::Contains("lease not found"), dtrain::IoError);

    std::int64_t other = c.lease_grant(60s);
    c.put(p + "revoked", "x", other);
    c.lease_revoke(other);
    CHECK(c.range(p + "revoked").kvs.empty());
    c.lease_revoke(other);  // already gone: not an error
  }

  TEST_CASE("threads share a client") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    auto p = etcdtest::unique_prefix();
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 10; ++i) c.put(p + std::to_string(t) + "/" + std::to_string(i), "v");
      });
    threads.clear();
    CHECK(c.range_prefix(p).count == 40);
  }

  TEST_CASE("etcd killed: the next call throws IoError naming the endpoint") {
    EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    c.put("/k", "v");
    etcd.kill();
    CHECK_THROWS_WITH_AS(c.range("/k"), doctest::Contains(etcd.endpoint().c_str()), dtrain::IoError);
    REQUIRE(etcd.restart());  // the same data dir: the key survived
    CHECK(c.range("/k").kvs.at(0).value == "v");
  }
}
