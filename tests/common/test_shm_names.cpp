// Segment names and their sweep (common/shm_names.hpp): the stem DTRAIN_SHM_PREFIX is checked, and a
// sweep removes exactly the /dev/shm entries that start with it.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/shm_names.hpp"

using namespace dtrain;

namespace {

bool exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

void make(const std::string& name) {
  int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  ::close(fd);
}

}  // namespace

TEST_SUITE("common::shm_names") {
  TEST_CASE("a stem holds letters, digits, '-', '_' and '.' only, at most 64 of them") {
    CHECK(shm_names::valid_prefix("dtrain-1234-0123456789abcdef-"));
    CHECK(shm_names::valid_prefix("a.b_c"));
    CHECK_FALSE(shm_names::valid_prefix(""));
    CHECK_FALSE(shm_names::valid_prefix("../etc"));
    CHECK_FALSE(shm_names::valid_prefix("a/b"));
    CHECK_FALSE(shm_names::valid_prefix("a*"));
    CHECK_FALSE(shm_names::valid_prefix(std::string(65, 'a')));

    ::unsetenv("DTRAIN_SHM_PREFIX");
    CHECK(shm_names::env_prefix() == "");
    ::setenv("DTRAIN_SHM_PREFIX", "dtrain-7-ab-", 1);
    CHECK(shm_names::env_prefix() == "dtrain-7-ab-");
    ::setenv("DTRAIN_SHM_PREFIX", "x/../y", 1);
    CHECK_THROWS_WITH_AS(shm_names::env_prefix(), doctest::Contains("DTRAIN_SHM_PREFIX='x/../y'"), ConfigError);
    ::unsetenv("DTRAIN_SHM_PREFIX");
  }

  TEST_CASE("a sweep removes the entries with the stem and nothing else") {
    const std::string stem = fmt::format("dtrain-test-sweep-{}-", ::getpid());
    const std::string other = fmt::format("dtrain-test-sweeq-{}-", ::getpid());
    make(stem + "a");
    make(stem + "b");
    make(other + "a");
    CHECK(shm_names::sweep(stem) == 2);
    CHECK_FALSE(exists(stem + "a"));
    CHECK_FALSE(exists(stem + "b"));
    CHECK(exists(other + "a"));
    CHECK(shm_names::sweep("") == 0);     // an empty stem would match everything: refused
    CHECK(shm_names::sweep("a/b") == 0);  // so is one with a slash
    CHECK(exists(other + "a"));
    CHECK(shm_names::sweep(other) == 1);
  }
}
