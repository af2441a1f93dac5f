#include <doctest/doctest.h>

#include <cstdlib>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/params.hpp"

using namespace dtrain;

TEST_SUITE("common::params") {
  TEST_CASE("defaults, environment and malformed values") {
    ::unsetenv("DTRAIN_COLL_TIMEOUT_S");
    CHECK(param_int("DTRAIN_COLL_TIMEOUT_S") == 300);
    ::setenv("DTRAIN_COLL_TIMEOUT_S", "12", 1);
    CHECK(param_int("DTRAIN_COLL_TIMEOUT_S") == 12);
    ::setenv("DTRAIN_COLL_TIMEOUT_S", "12s", 1);
    CHECK_THROWS_WITH_AS(param_int("DTRAIN_COLL_TIMEOUT_S"), doctest::Contains("DTRAIN_COLL_TIMEOUT_S=12s"),
                         ConfigError);
    ::unsetenv("DTRAIN_COLL_TIMEOUT_S");
  }

  TEST_CASE("the registry is sorted and unique") {
    auto all = params();
    for (std::size_t i = 1; i < all.size(); ++i) CHECK(std::string(all[i - 1].name) < std::string(all[i].name));
  }
}
