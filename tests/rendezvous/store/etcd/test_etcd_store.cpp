// EtcdStore against a real etcd: the built-in store's contract (store_semantics.hpp, the checks the
// in-memory store and TcpStore pass), then what threads and a lost etcd do to it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "client.hpp"
#include "dtrain/common/errors.hpp"
#include "etcd_server.hpp"
#include "etcd_store.hpp"
#include "../store_semantics.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;
using dtrain::rdzv::as_bytes;
using dtrain::rdzv::to_string;
using etcdtest::EtcdServer;
using etcdtest::seconds_since;
using Clock = std::chrono::steady_clock;

namespace {

std::shared_ptr<EtcdStore> open_store(const EtcdServer& etcd, const std::string& prefix) {
  return std::make_shared<EtcdStore>(std::make_shared<Client>(etcd.options()), prefix);
}

}  // namespace

TEST_SUITE("etcd::store") {
  TEST_CASE("the built-in store's contract") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    auto prefix = etcdtest::unique_prefix();
    rt::same_semantics([&]() -> std::shared_ptr<dtrain::rdzv::Store> { return open_store(etcd, prefix); });
  }

  TEST_CASE("keys live under the prefix; stores with other prefixes do not see them") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    auto p = etcdtest::unique_prefix(), q = etcdtest::unique_prefix();
    auto a = open_store(etcd, p), b = open_store(etcd, q);
    a->set("nccl/id", as_bytes("abc"));
    CHECK(a->client().range(p + "nccl/id").kvs.at(0).value == "abc");
    std::vector<std::string> keys{"nccl/id"};
    CHECK(a->check(keys));
    CHECK_FALSE(b->check(keys));
    CHECK_FALSE(b->erase("nccl/id"));
    std::vector<std::string> many;
    for (int i = 0; i < 150; ++i) many.push_back("k" + std::to_string(i));  // more than one transaction holds
    for (const auto& k : many) a->set(k, as_bytes("x"));
    CHECK(a->check(many));
    a->erase("k149");
    CHECK_FALSE(a->check(many));
  }

  TEST_CASE("a blocking get is woken by a set from another thread; a get times out naming the key") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    auto p = etcdtest::unique_prefix();
    auto s = open_store(etcd, p);
    auto t0 = Clock::now();
    std::jthread setter([&] {
      std::this_thread::sleep_for(300ms);
      open_store(etcd, p)->set("late", as_bytes("here"));
    });
    CHECK(to_string(s->get("late", 20s)) == "here");
    CHECK(seconds_since(t0) >= 0.29);
    CHECK(seconds_since(t0) < 5.0);

    t0 = Clock::now();
    CHECK_THROWS_WITH_AS(s->get("never", 300ms), doctest::Contains("get: no value for key 'never' after 300 ms"),
                         dtrain::TimeoutError);
    CHECK(seconds_since(t0) >= 0.29);
    CHECK_THROWS_AS(s->get("never", 0ms), dtrain::TimeoutError);
    s->set("big", dtrain::rdzv::Bytes(dtrain::rdzv::wire::kMaxValue, 7));  // the largest value fits etcd's request limit
    CHECK(s->get("big", 1s).size() == dtrain::rdzv::wire::kMaxValue);
  }

  TEST_CASE("add from several threads and clients sums exactly") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    auto p = etcdtest::unique_prefix();
    auto shared = open_store(etcd, p);
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        auto own = t % 2 == 0 ? shared : open_store(etcd, p);  // half share a client, half have their own
        for (int i = 0; i < 15; ++i) own->add("counter", t + 1);
      });
    threads.clear();
    CHECK(shared->add("counter", 0) == 15 * (1 + 2 + 3 + 4));
    CHECK(to_string(shared->get("counter", 1s)) == "150");
  }

  TEST_CASE("compare_set from several threads: exactly one wins") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    auto p = etcdtest::unique_prefix();
    std::vector<std::future<std::string>> got;
    for (int t = 0; t < 4; ++t)
      got.push_back(std::async(std::launch::async, [&, t] {
        return to_string(open_store(etcd, p)->compare_set("owner", {}, as_bytes("t" + std::to_string(t))));
      }));
    std::set<std::string> answers;
    for (auto& f : got) answers.insert(f.get());
    REQUIRE(answers.size() == 1);  // the winner's value, for the winner and the losers alike
    CHECK(answers.begin()->rfind("t", 0) == 0);
  }

  TEST_CASE("a barrier of several threads releases them together, round after round") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    auto p = etcdtest::unique_prefix();
    constexpr int kThreads = 4, kRounds = 3;
    std::atomic<int> arrived[kRounds] = {};
    std::atomic<int> early{0};
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        auto s = open_store(etcd, p);
        for (int r = 0; r < kRounds; ++r) {
          arrived[r]++;
          s->barrier("sync", kThreads, 30s);
          if (arrived[r].load() != kThreads) early++;  // released before everyone of the round came
        }
      });
    threads.clear();
    CHECK(early.load() == 0);
    for (auto& a : arrived) CHECK(a.load() == kThreads);
    // the barrier reset after each round: its state is gone, one more round of 1 passes at once
    auto s = open_store(etcd, p);
    CHECK(s->client().range(p + "__barrier/sync/arrived").kvs.empty());
    CHECK(s->client().range(p + "__barrier/sync/round").kvs.at(0).value == std::to_string(kRounds));
    s->barrier("sync", 1, 1s);
  }

  TEST_CASE("etcd lost under a blocking get and a barrier: IoError, no hang") {
    EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    auto s = open_store(etcd, "/p/");
    auto t0 = Clock::now();
    std::jthread killer([&] {
      std::this_thread::sleep_for(300ms);
      etcd.kill();
    });
    CHECK_THROWS_AS(s->get("never", 30s), dtrain::IoError);
    killer.join();
    CHECK_THROWS_WITH_AS(s->barrier("b", 2, 30s), doctest::Contains(etcd.endpoint().c_str()), dtrain::IoError);
    CHECK(seconds_since(t0) < 10.0);
  }
}
