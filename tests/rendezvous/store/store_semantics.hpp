#pragma once
// The Store contract as the built-in stores keep it (store/kv_table.hpp, store/store_barrier.hpp):
// one set of checks that every Store implementation must pass alike (the in-memory store, TcpStore
// against a real server, the etcd store), so that the same calls give the same results and throw
// the same exceptions.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <thread>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "dtrain/rendezvous/store/store_barrier.hpp"

namespace rt {

using namespace std::chrono_literals;

// A store per caller: separate TcpStore connections to one scope, or one shared in-memory store.
using Open = std::function<std::shared_ptr<dtrain::rdzv::Store>()>;

inline void same_semantics(const Open& open) {
  using namespace dtrain::rdzv;
  using dtrain::ConfigError;
  using dtrain::IoError;
  using dtrain::TimeoutError;
  auto s = open();
  SUBCASE("values, add, compare_set, check, erase") {
    s->set("k", as_bytes("v"));
    CHECK(to_string(s->get("k", 1s)) == "v");
    CHECK(s->add("n", 5) == 5);
    CHECK(s->add("n", -7) == -2);
    CHECK(to_string(s->get("n", 1s)) == "-2");
    s->set("empty", Bytes{});
    CHECK(s->add("empty", 1) == 1);
    CHECK(s->compare_set("c", as_bytes("x"), as_bytes("y")).empty());
    CHECK(to_string(s->compare_set("c", {}, as_bytes("y"))) == "y");
    CHECK(to_string(s->compare_set("c", as_bytes("z"), as_bytes("w"))) == "y");
    std::vector<std::string> keys{"k", "n"};
    CHECK(s->check(keys));
    CHECK(s->erase("k"));
    CHECK_FALSE(s->erase("k"));
    CHECK_FALSE(s->check(keys));
  }
  SUBCASE("add refuses what is not a decimal integer, and overflow") {
    s->set("t", as_bytes("12x"));
    CHECK_THROWS_WITH_AS(s->add("t", 1), doctest::Contains("add 't': the value is not an integer"), IoError);
    s->set("t", as_bytes("+1"));
    CHECK_THROWS_AS(s->add("t", 1), IoError);
    s->set("t", as_bytes(std::to_string(std::numeric_limits<std::int64_t>::max())));
    CHECK_THROWS_WITH_AS(s->add("t", 1), doctest::Contains("overflows"), IoError);
  }
  SUBCASE("bad keys and oversize values") {
    CHECK_THROWS_AS(s->set("", as_bytes("v")), ConfigError);
    CHECK_THROWS_AS(s->set(std::string(wire::kMaxKey + 1, 'k'), as_bytes("v")), ConfigError);
    CHECK_THROWS_AS(s->set("k", Bytes(wire::kMaxValue + 1)), ConfigError);
    CHECK_THROWS_AS(s->barrier("", 1, 1s), ConfigError);
  }
  SUBCASE("timeouts name the key and the barrier count") {
    CHECK_THROWS_WITH_AS(s->get("nope", 50ms), doctest::Contains("no value for key 'nope' after 50 ms"), TimeoutError);
    CHECK_THROWS_WITH_AS(s->barrier("b", 2, 50ms), doctest::Contains("barrier 'b': 1 of 2 arrived after 50 ms"),
                         TimeoutError);
    s->barrier("b", 1, 1s);  // the timed-out caller left: a barrier of 1 passes
  }
  SUBCASE("barrier counts are checked") {
    CHECK_THROWS_AS(s->barrier("b", 0, 1s), dtrain::Error);  // TcpStore refuses it before sending
    CHECK_THROWS_WITH_AS(s->barrier("b", kMaxBarrierCount + 1, 1s), doctest::Contains("out of range"), IoError);
    auto other = open();
    // The waiter enters with 2 and retries when our count of 3 was in first (then it is refused).
    std::jthread waiter([&] {
      for (;;) {
        try {
          other->barrier("b", 2, 10s);
          return;
        } catch (const IoError&) {
          std::this_thread::sleep_for(1ms);
        }
      }
    });
    bool refused = false;
    for (int i = 0; i < 1000 && !refused; ++i) {  // until the waiter is in: a count of 3 is refused
      try {
        s->barrier("b", 3, 10ms);
      } catch (const IoError& e) {
        CHECK(std::string(e.what()).find("this caller expects 3 but others expect 2") != std::string::npos);
        refused = true;
      } catch (const TimeoutError&) {
        // we were in first, alone: timed out and left; let the waiter in
        std::this_thread::sleep_for(20ms);
      }
    }
    CHECK(refused);
    s->barrier("b", 2, 10s);
  }
}

}  // namespace rt
