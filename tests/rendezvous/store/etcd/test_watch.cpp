// Watch against a real etcd: events in order from a revision, waiting without events, close() from
// another thread, and the errors of a compacted revision and of an etcd that dies.
#include <doctest/doctest.h>

#include <chrono>
#include <ctime>
#include <future>
#include <thread>

#include "client.hpp"
#include "dtrain/common/errors.hpp"
#include "etcd_server.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;
using etcdtest::EtcdServer;
using etcdtest::seconds_since;
using Clock = std::chrono::steady_clock;

namespace {

// The events of w until there are n, or 10 s passed.
std::vector<WatchEvent> collect(Watch& w, std::size_t n) {
  std::vector<WatchEvent> all;
  auto deadline = Clock::now() + 10s;
  while (all.size() < n && Clock::now() < deadline) {
    auto some = w.next(1s);
    all.insert(all.end(), some.begin(), some.end());
  }
  return all;
}

}  // namespace

TEST_SUITE("etcd::client") {
  TEST_CASE("a watch reports puts and erases from its start revision, in order") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    auto c = std::make_shared<Client>(etcd.options());
    auto p = etcdtest::unique_prefix();
    std::int64_t r1 = c->put(p + "a", "1");
    c->put(p + "b", "2");
    c->erase(p + "a");
    Watch past(*c, p, prefix_end(p), r1);  // history replayed from r1
    auto ev = collect(past, 3);
    REQUIRE(ev.size() == 3);
    CHECK(ev[0].type == WatchEvent::Type::put);
    CHECK(ev[0].kv.key == p + "a");
    CHECK(ev[0].kv.value == "1");
    CHECK(ev[0].kv.mod_revision == r1);
    CHECK(ev[1].kv.key == p + "b");
    CHECK(ev[1].kv.value == "2");
    CHECK(ev[2].type == WatchEvent::Type::erase);
    CHECK(ev[2].kv.key == p + "a");
    CHECK(ev[2].kv.mod_revision > ev[1].kv.mod_revision);
    CHECK(ev[2].kv.value.empty());

    Watch now(etcd.options(), p + "b", "", 0);  // a watch of its own (no client), from now on
    c->put(p + "a", "ignored: another key");
    c->put(p + "b", "3");
    auto later = collect(now, 1);
    REQUIRE(later.size() == 1);
    CHECK(later[0].kv.value == "3");
    CHECK(later[0].kv.version == 2);
    CHECK(collect(past, 2).size() == 2);  // the first watch goes on
  }

  TEST_CASE("a key whose lease is revoked or expires shows as an erase event") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    auto p = etcdtest::unique_prefix();
    std::int64_t revoked = c.lease_grant(60s), expiring = c.lease_grant(2s);
    std::int64_t rev = c.put(p + "revoked", "1", revoked);
    c.put(p + "expiring", "2", expiring);
    Watch w(c, p, prefix_end(p), rev + 2);  // from after both puts
    c.lease_revoke(revoked);
    auto ev = collect(w, 2);  // the expiry comes once the 2 s TTL passed
    REQUIRE(ev.size() == 2);
    CHECK(ev[0].type == WatchEvent::Type::erase);
    CHECK(ev[0].kv.key == p + "revoked");
    CHECK(ev[1].type == WatchEvent::Type::erase);
    CHECK(ev[1].kv.key == p + "expiring");
  }

  TEST_CASE("next() waits its timeout when nothing happens, without spinning") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    Watch w(c, etcdtest::unique_prefix(), "", 0);
    auto t0 = Clock::now();
    std::clock_t cpu0 = std::clock();
    CHECK(w.next(400ms).empty());
    CHECK(seconds_since(t0) >= 0.39);
    CHECK(double(std::clock() - cpu0) / CLOCKS_PER_SEC < 0.2);
    CHECK(w.next(0ms).empty());
  }

  TEST_CASE("close() from another thread ends a waiting next() promptly") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    Watch w(c, etcdtest::unique_prefix(), "", 0);
    auto t0 = Clock::now();
    auto waiting = std::async(std::launch::async, [&] {
      try {
        w.next(30s);
        return std::string("returned");
      } catch (const dtrain::IoError& e) {
        return std::string(e.what());
      }
    });
    std::this_thread::sleep_for(200ms);
    CHECK_FALSE(w.closed());
    w.close();
    REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
    CHECK(waiting.get().find("was closed") != std::string::npos);
    CHECK(seconds_since(t0) < 3.0);
    CHECK(w.closed());
    CHECK_THROWS_AS(w.next(1s), dtrain::IoError);
  }

  TEST_CASE("a watch from a compacted revision ends with the reason") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    auto p = etcdtest::unique_prefix();
    std::int64_t r1 = c.put(p + "k", "1");
    std::int64_t r2 = c.put(p + "k", "2");
    std::string out;
    REQUIRE_MESSAGE(etcd.etcdctl("compaction " + std::to_string(r2), &out) == 0, out);
    Watch w(c, p + "k", "", r1);  // etcd confirms it, then cancels it
    CHECK_THROWS_WITH_AS(w.next(10s), doctest::Contains("compacted its history up to revision"), dtrain::IoError);
  }

  TEST_CASE("a watch throws IoError when etcd dies") {
    EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    Watch w(c, "/k", "", 0);
    c.put("/k", "1");
    CHECK(collect(w, 1).size() == 1);
    auto t0 = Clock::now();
    std::thread killer([&] {
      std::this_thread::sleep_for(200ms);
      etcd.kill();
    });
    CHECK_THROWS_WITH_AS(w.next(20s), doctest::Contains("ended"), dtrain::IoError);
    killer.join();
    CHECK(seconds_since(t0) < 5.0);
    CHECK_FALSE(w.closed());
  }
}
