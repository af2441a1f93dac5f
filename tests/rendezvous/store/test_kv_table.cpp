// The store's key-value table without sockets: key and value checks, budget, ADD, COMPARE_SET.
#include <doctest/doctest.h>

#include <limits>

#include "refusal.hpp"
#include "dtrain/rendezvous/store/kv_table.hpp"

using namespace dtrain::rdzv;
using rt::refusal_of;
using wire::ErrorCode;

namespace {

Bytes b(std::string_view s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST_SUITE("rendezvous::server::kv_table") {
  TEST_CASE("keys and values are checked against the wire limits") {
    CHECK(checked_key("k") == "k");
    CHECK(checked_key(std::string(wire::kMaxKey, 'k')).size() == wire::kMaxKey);
    auto empty = refusal_of([] { checked_key(""); });
    REQUIRE(empty);
    CHECK(empty->code == ErrorCode::bad_request);
    CHECK(empty->what == "empty key");
    auto longkey = refusal_of([] { checked_key(std::string(wire::kMaxKey + 1, 'k')); });
    REQUIRE(longkey);
    CHECK(longkey->code == ErrorCode::limit);
    CHECK(longkey->what == "key of 1025 bytes exceeds the 1024-byte limit");
    CHECK_FALSE(refusal_of([] { check_value("k", wire::kMaxValue); }));
    auto big = refusal_of([] { check_value("k", wire::kMaxValue + 1); });
    REQUIRE(big);
    CHECK(big->code == ErrorCode::limit);
    CHECK(big->what.find("value for 'k' of 1048577 bytes") != std::string::npos);
    CHECK(get_timeout_text("k", 500) == "no value for key 'k' after 500 ms");
  }

  TEST_CASE("set, find, overwrite and erase keep the byte count exact") {
    KvTable t({}, "t");
    CHECK(t.find("a") == nullptr);
    t.set("a", b("123"));
    REQUIRE(t.find("a") != nullptr);
    CHECK(*t.find("a") == b("123"));
    CHECK(t.bytes() == 4);
    t.set("a", b("1"));
    CHECK(t.bytes() == 2);
    t.set("bb", Bytes{});
    CHECK(t.size() == 2);
    CHECK(t.contains("bb"));
    CHECK(t.bytes() == 4);
    CHECK(t.erase("a"));
    CHECK_FALSE(t.erase("a"));
    CHECK(t.bytes() == 2);
    CHECK(t.size() == 1);
    auto big = refusal_of([&] { t.set("v", Bytes(wire::kMaxValue + 1)); });
    REQUIRE(big);
    CHECK(big->code == ErrorCode::limit);
    CHECK_FALSE(t.contains("v"));
  }

  TEST_CASE("the key and byte budget refuses, names the owner, and changes nothing") {
    KvTable t({2, 10}, "run 'r' generation 3");
    t.set("a", b("1"));
    t.set("b", b("1"));
    auto keys = refusal_of([&] { t.set("c", b("1")); });
    REQUIRE(keys);
    CHECK(keys->code == ErrorCode::limit);
    CHECK(keys->what == "run 'r' generation 3 holds 2 keys, the limit");
    CHECK_FALSE(t.contains("c"));
    t.set("a", b("22"));  // overwriting needs no new key
    CHECK(t.bytes() == 5);
    auto bytes = refusal_of([&] { t.set("b", b("123456789")); });
    REQUIRE(bytes);
    CHECK(bytes->what == "run 'r' generation 3 would hold 13 bytes, over the 10-byte limit");
    CHECK(*t.find("b") == b("1"));
    CHECK(t.bytes() == 5);
    CHECK(refusal_of([&] { t.add("c", 1); }));  // ADD is under the same budget
    t.erase("b");
    CHECK(t.add("c", 1) == 1);
  }

  TEST_CASE("tables draw on shared budgets: a run's generations, a server's runs") {
    Budget server({5, 100}, "this rendezvous (all runs)");
    {
      Budget run_a({3, 40}, "run 'a' (all generations)", &server);
      Budget run_b({3, 40}, "run 'b' (all generations)", &server);
      KvTable a0({10, 100}, "run 'a' generation 0", &run_a);
      KvTable a1({10, 100}, "run 'a' generation 1", &run_a);
      KvTable b0({10, 100}, "run 'b' generation 0", &run_b);
      a0.set("k1", b("12345678"));  // 10 bytes
      a0.set("k2", b("12345678"));
      a1.set("k3", b("12345678"));
      CHECK(run_a.keys() == 3);
      CHECK(run_a.bytes() == 30);
      CHECK(server.keys() == 3);
      // the run's budget is shared by its generations: a1 alone is far from its own limit
      auto run_full = refusal_of([&] { a1.set("k4", b("1")); });
      REQUIRE(run_full);
      CHECK(run_full->code == ErrorCode::limit);
      CHECK(run_full->what == "run 'a' (all generations) holds 3 keys, the limit");
      CHECK_FALSE(a1.contains("k4"));
      CHECK(a1.size() == 1);
      // overwriting to a larger value is charged the difference
      auto bytes = refusal_of([&] { a0.set("k1", Bytes(30)); });
      REQUIRE(bytes);
      CHECK(bytes->what == "run 'a' (all generations) would hold 52 bytes, over the 40-byte limit");
      CHECK(a0.bytes() == 20);
      b0.set("x", b("1"));
      b0.set("y", b("1"));
      auto server_full = refusal_of([&] { b0.set("z", b("1")); });  // 6th key of the server
      REQUIRE(server_full);
      CHECK(server_full->what == "this rendezvous (all runs) holds 5 keys, the limit");
      CHECK(a0.erase("k1"));
      CHECK(server.keys() == 4);
      b0.set("z", b("1"));
      CHECK(server.keys() == 5);
    }
    // freed tables and budgets give back everything they held
    CHECK(server.keys() == 0);
    CHECK(server.bytes() == 0);
  }

  TEST_CASE("add works on decimal text; missing and empty count as 0") {
    KvTable t({}, "t");
    CHECK(t.add("n", 5) == 5);
    CHECK(t.add("n", -7) == -2);
    CHECK(*t.find("n") == b("-2"));
    t.set("e", Bytes{});
    CHECK(t.add("e", 3) == 3);
    t.set("big", b("9223372036854775806"));
    CHECK(t.add("big", 1) == std::numeric_limits<std::int64_t>::max());

    SUBCASE("text that is not a whole integer is refused, the value kept") {
      for (std::string_view bad : {"12x", " 1", "1.5", "+1", "x", "99999999999999999999"}) {
        CAPTURE(bad);
        t.set("s", b(bad));
        auto r = refusal_of([&] { t.add("s", 1); });
        REQUIRE(r);
        CHECK(r->code == ErrorCode::bad_request);
        CHECK(r->what == "add 's': the value is not an integer");
        CHECK(*t.find("s") == b(bad));
      }
    }
    SUBCASE("overflow is refused, the value kept") {
      auto r = refusal_of([&] { t.add("big", 1); });
      REQUIRE(r);
      CHECK(r->code == ErrorCode::bad_request);
      CHECK(r->what.find("overflows") != std::string::npos);
      CHECK(*t.find("big") == b("9223372036854775807"));
    }
  }

  TEST_CASE("compare_set") {
    KvTable t({}, "t");
    bool swapped = true;
    SUBCASE("a missing key matches only an empty expected") {
      CHECK(t.compare_set("k", b("x"), b("y"), swapped).empty());
      CHECK_FALSE(swapped);
      CHECK_FALSE(t.contains("k"));
      CHECK(t.compare_set("k", {}, b("y"), swapped) == b("y"));
      CHECK(swapped);
    }
    SUBCASE("an existing value is swapped only when it matches") {
      t.set("k", b("a"));
      CHECK(t.compare_set("k", b("b"), b("c"), swapped) == b("a"));
      CHECK_FALSE(swapped);
      CHECK(t.compare_set("k", b("a"), b("c"), swapped) == b("c"));
      CHECK(swapped);
      CHECK(*t.find("k") == b("c"));
      CHECK(t.bytes() == 2);
    }
    SUBCASE("an oversize desired value is refused even without a match") {
      t.set("k", b("a"));
      auto r = refusal_of([&] { t.compare_set("k", b("zzz"), Bytes(wire::kMaxValue + 1), swapped); });
      REQUIRE(r);
      CHECK(r->code == ErrorCode::limit);
    }
  }
}
