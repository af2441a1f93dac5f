#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/text.hpp"

using namespace dtrain;

TEST_SUITE("common::text") {
  TEST_CASE("edit distance and closest candidate") {
    CHECK(text::edit_distance("kitten", "sitting") == 3);
    CHECK(text::edit_distance("", "abc") == 3);
    std::vector<std::string> keys{"instances", "gpus_per_instance", "procs_per_instance"};
    CHECK(text::closest("instanses", keys) == std::optional<std::string>("instances"));
    CHECK_FALSE(text::closest("zebra", keys).has_value());
  }

  TEST_CASE("host:port parsing") {
    auto hp = text::parse_host_port("10.0.0.1:29400", "--rdzv");
    CHECK(hp.host == "10.0.0.1");
    CHECK(hp.port == 29400);
    auto v6 = text::parse_host_port("[::1]:80", "--rdzv");
    CHECK(v6.host == "::1");
    SUBCASE("errors name the problem") {
      CHECK_THROWS_WITH_AS(text::parse_host_port("host", "x"), doctest::Contains("not HOST:PORT"), ConfigError);
      CHECK_THROWS_WITH_AS(text::parse_host_port("h:70000", "x"), doctest::Contains("out of range"), ConfigError);
      CHECK_THROWS_WITH_AS(text::parse_host_port("h:abc", "x"), doctest::Contains("not a number"), ConfigError);
      CHECK_THROWS_WITH_AS(text::parse_host_port(":80", "x"), doctest::Contains("empty host"), ConfigError);
    }
  }

  TEST_CASE("split and join round-trip") {
    auto parts = text::split("a,b,,c", ',');
    REQUIRE(parts.size() == 4);
    CHECK(text::join(parts, ",") == "a,b,,c");
  }
}
