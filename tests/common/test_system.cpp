#include <doctest/doctest.h>
#include <sched.h>

#include "dtrain/common/system.hpp"

TEST_SUITE("common::system") {
  TEST_CASE("usable_cpus follows the affinity mask") {
    cpu_set_t saved;
    REQUIRE(::sched_getaffinity(0, sizeof saved, &saved) == 0);
    CHECK(dtrain::sys::usable_cpus() == CPU_COUNT(&saved));
    int first = 0;
    while (!CPU_ISSET(first, &saved)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
    CHECK(dtrain::sys::usable_cpus() == 1);
    REQUIRE(::sched_setaffinity(0, sizeof saved, &saved) == 0);
  }
}
