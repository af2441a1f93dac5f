#include <doctest/doctest.h>
#include <sched.h>
#include <sys/resource.h>

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

  TEST_CASE("raise_fd_limit lifts the soft open-files limit to the hard one") {
    rlimit saved{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
    if (saved.rlim_max < 256) return;  // nothing to lower and raise here
    rlimit low = saved;
    low.rlim_cur = 128;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
    long now = dtrain::sys::raise_fd_limit();
    rlimit after{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &after) == 0);
    CHECK(after.rlim_cur == saved.rlim_max);
    CHECK(now > 128);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  }
}
