// The progress page names the calls of 0.3 (progress.cpp, dtrain/common/progress_page.hpp): a worker
// with DTRAIN_PROGRESS_FILE publishes each call, and the page's reader (the agent's `dtrain status`
// and hang diagnosis) sees "reduce", "gather", "scatter", "alltoall", "alltoallv" with the call's
// number. Its own executable: the page is mapped once per process.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "dtrain/common/progress_page.hpp"
#include "harness.hpp"

TEST_SUITE("collectives::progress") {
  TEST_CASE("each new call is published under its own name and number") {
    char path[] = "/tmp/dtrain-progress-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, dtrain::progress::kPageBytes) == 0);
    void* p = ::mmap(nullptr, dtrain::progress::kPageBytes, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(p != MAP_FAILED);
    ::setenv("DTRAIN_PROGRESS_FILE", path, 1);
    const auto* page = static_cast<const dtrain::progress::Page*>(p);
    std::string seen;
    dtrain::coll::test::World w;
    w.size = 1;
    auto errors = dtrain::coll::test::run_ranks(w, [&](Communicator& c, int) {
      auto last = [&] {
        const auto s = dtrain::progress::read(*page);
        return std::string(dtrain::progress::op_name(s.op)) + " #" + std::to_string(s.seq) +
               (s.in_call() ? " (in call)" : "");
      };
      double a[4] = {1, 2, 3, 4}, b[4];
      std::size_t one[1] = {4}, zero[1] = {0};
      c.reduce(a, b, 4, DTRAIN_FLOAT64, DTRAIN_SUM, 0);
      seen += last() + "; ";
      c.gather(a, b, 4, DTRAIN_FLOAT64, 0);
      seen += last() + "; ";
      c.scatter(a, b, 4, DTRAIN_FLOAT64, 0);
      seen += last() + "; ";
      c.alltoall(a, b, 4, DTRAIN_FLOAT64);
      seen += last() + "; ";
      c.alltoallv(a, one, zero, b, one, zero, DTRAIN_FLOAT64);
      seen += last();
    });
    ::unsetenv("DTRAIN_PROGRESS_FILE");
    ::munmap(p, dtrain::progress::kPageBytes);
    ::close(fd);
    ::unlink(path);
    CHECK(errors[0] == "");
    CHECK(seen == "reduce #1; gather #2; scatter #3; alltoall #4; alltoallv #5");
  }
}
