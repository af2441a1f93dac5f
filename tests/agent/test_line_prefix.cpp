#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "dtrain/agent/line_prefix.hpp"
#include "dtrain/common/errors.hpp"

using dtrain::agent::format_tag;

TEST_SUITE("agent::line_prefix") {
  TEST_CASE("tag format fields") {
    CHECK(format_tag("[{node}/{rank}] ", 1, 7, 3, "stdout") == "[1/7] ");
    CHECK(format_tag("{local_rank}:{stream}| ", 0, 5, 2, "stderr") == "2:stderr| ");
    CHECK(format_tag("{{lit}} {rank}", 0, 4, 0, "stdout") == "{lit} 4");
    CHECK_THROWS_AS(format_tag("{rnak}", 0, 0, 0, "stdout"), dtrain::ConfigError);
    CHECK_THROWS_AS(format_tag("[{rank", 0, 0, 0, "stdout"), dtrain::ConfigError);
  }

  TEST_CASE("timestamp prefix shape") {
    auto s = dtrain::agent::timestamp_prefix(std::chrono::system_clock::now());
    REQUIRE(s.size() == 24);
    CHECK(s[4] == '-');
    CHECK(s[10] == 'T');
    CHECK(s[19] == '.');
    CHECK(s.back() == ' ');
  }
}
