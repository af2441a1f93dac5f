// The gateway's JSON shapes without an etcd: base64 with every padding, int64 fields as strings,
// omitted defaults, both error shapes, prefix_end.
#include <doctest/doctest.h>

#include "client.hpp"
#include "dtrain/common/errors.hpp"
#include "gateway.hpp"

using namespace dtrain::etcd;
using gw::json;

TEST_SUITE("etcd::client") {
  TEST_CASE("base64 round trips bytes of every length, binary included") {
    std::string all;
    for (int i = 0; i < 256; ++i) all += char(i);
    for (std::size_t n : {0u, 1u, 2u, 3u, 4u, 5u, 255u, 256u}) {
      std::string bytes = all.substr(0, n);
      std::string text = gw::b64encode(bytes);
      CHECK(text.size() % 4 == 0);
      CHECK(gw::b64decode(text, "a key") == bytes);
    }
    CHECK(gw::b64encode("foo") == "Zm9v");
    CHECK(gw::b64encode("fo") == "Zm8=");
    CHECK(gw::b64decode("Zm8=", "v") == "fo");
    CHECK(gw::b64decode("Zg==", "v") == "f");
    CHECK_THROWS_WITH_AS(gw::b64decode("Zm9", "a value"), doctest::Contains("a value that is not base64"), dtrain::IoError);
    CHECK_THROWS_AS(gw::b64decode("!!!!", "a value"), dtrain::IoError);
  }

  TEST_CASE("prefix_end follows etcd's rule") {
    CHECK(prefix_end("abc") == "abd");
    CHECK(prefix_end(std::string("a\xff", 2)) == "b");
    CHECK(prefix_end(std::string("\xff\xff", 2)) == std::string(1, '\0'));
    CHECK(prefix_end("") == std::string(1, '\0'));
  }

  TEST_CASE("int64 fields come as strings or numbers, and are 0 when omitted") {
    auto j = json::parse(R"({"a": "12", "b": 7, "c": "-3", "bad": "x1", "arr": []})");
    CHECK(gw::i64(j, "a") == 12);
    CHECK(gw::i64(j, "b") == 7);
    CHECK(gw::i64(j, "c") == -3);
    CHECK(gw::i64(j, "missing") == 0);
    CHECK_THROWS_WITH_AS(gw::i64(j, "bad"), doctest::Contains("\"bad\""), dtrain::IoError);
    CHECK_THROWS_AS(gw::i64(j, "arr"), dtrain::IoError);
  }

  TEST_CASE("a range reply with omitted fields") {
    auto empty = gw::range_from(json::parse(R"({"header": {"revision": "9"}})"));
    CHECK(empty.kvs.empty());
    CHECK(empty.revision == 9);
    CHECK(empty.count == 0);
    auto one = gw::range_from(json::parse(
        R"({"header": {"revision": "4"}, "kvs": [{"key": "Zm9v", "create_revision": "2", "mod_revision": "4",
             "version": "3"}], "count": "1"})"));
    REQUIRE(one.kvs.size() == 1);
    CHECK(one.kvs[0].key == "foo");
    CHECK(one.kvs[0].value.empty());  // an empty value is omitted
    CHECK(one.kvs[0].mod_revision == 4);
    CHECK(one.kvs[0].version == 3);
    CHECK(one.kvs[0].lease == 0);
  }

  TEST_CASE("compares and operations in the gateway's shape") {
    auto c = gw::compare_to(Compare{"k", Compare::Target::mod, Compare::Result::less, 5, {}});
    CHECK(c == json::parse(R"({"key": "aw==", "target": "MOD", "result": "LESS", "mod_revision": "5"})"));
    auto v = gw::compare_to(Compare{"k", Compare::Target::value, Compare::Result::not_equal, 0, "x"});
    CHECK(v["value"] == "eA==");
    CHECK(gw::op_to(Op::put("k", "v", 7)) ==
          json::parse(R"({"request_put": {"key": "aw==", "value": "dg==", "lease": "7"}})"));
    CHECK(gw::op_to(Op::range("k")) == json::parse(R"({"request_range": {"key": "aw=="}})"));
    CHECK(gw::op_to(Op::erase("a", "b")) == json::parse(R"({"request_delete_range": {"key": "YQ==", "range_end": "Yg=="}})"));
  }

  TEST_CASE("error replies: unary, stream, and bodies that are not JSON") {
    auto unary = gw::error_of(json::parse(R"({"error": "etcdserver: x", "message": "etcdserver: x", "code": 5})"));
    REQUIRE(unary);
    CHECK(unary->code == 5);
    CHECK(unary->message == "etcdserver: x");
    auto stream = gw::error_of(json::parse(R"({"error": {"grpc_code": 16, "http_code": 401, "message": "m"}})"));
    REQUIRE(stream);
    CHECK(stream->code == 16);
    CHECK(gw::token_invalid(*stream));
    CHECK_FALSE(gw::error_of(json::parse(R"({"header": {}, "ID": "1", "TTL": "5"})")));
    CHECK_FALSE(gw::error_of(json::parse(R"({"header": {}, "error": ""})")));  // LeaseGrantResponse's own field
    auto text = gw::error_from_body(502, "Bad Gateway\n");
    CHECK(text.message == "HTTP 502: Bad Gateway");
    CHECK(gw::auth_refused({3, "etcdserver: authentication failed, invalid user ID or password"}));
    CHECK(gw::auth_refused({7, "etcdserver: permission denied"}));
    CHECK_FALSE(gw::auth_refused({5, "etcdserver: requested lease not found"}));
  }
}
