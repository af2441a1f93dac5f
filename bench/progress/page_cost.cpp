// The progress page's cost per collective call, on this machine: the writer's begin_call/end_call
// pair as the collectives make it (dtrain/common/progress_page.hpp, version 2: end_call adds the
// call's time inside to its op's accumulators) against the same pair without the accumulators
// (version 1's end_call: one store of end_ns), on a page mapped from a file as the workers map it.
// Rounds alternate the two (the same load drift on both); per round, the mean ns per pair over
// --calls pairs; printed: each side's minimum (the cost with the least interference) and median
// over the rounds, and their differences.
//
//   page_cost [--rounds N] [--calls N]
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dtrain/common/progress_page.hpp"

namespace pg = dtrain::progress;

namespace {

// Version 1's end_call, the baseline.
inline void end_call_v1(pg::Page& p, std::int64_t now) { p.end_ns.store(now, std::memory_order_release); }

template <bool kAccumulate>
double ns_per_pair(pg::Page& p, long calls, std::int64_t& clock) {
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) {
    // two ops in turn, as a step's allreduce and barrier; the clock moves as the coarse clock does
    auto op = (i & 1) != 0 ? pg::Op::barrier : pg::Op::allreduce;
    pg::begin_call(p, op, static_cast<std::uint64_t>(i), 64, clock);
    clock += 1000;
    if constexpr (kAccumulate) pg::end_call(p, clock);
    else end_call_v1(p, clock);
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 31;
  long calls = 2000000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: page_cost [--rounds N] [--calls N]\n");
      return 2;
    }
  }
  if (rounds < 1 || calls < 1) {
    std::fprintf(stderr, "page_cost: --rounds and --calls must be positive\n");
    return 2;
  }
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/dtrain-page-cost-XXXXXX";
  int fd = ::mkstemp(path.data());
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(pg::kPageBytes)) != 0) {
    std::perror("page_cost: page file");
    return 1;
  }
  void* m = ::mmap(nullptr, pg::kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ::unlink(path.c_str());
  if (m == MAP_FAILED) {
    std::perror("page_cost: mmap");
    return 1;
  }
  auto* page = static_cast<pg::Page*>(m);
  page->version.store(pg::kVersion);
  page->magic.store(pg::kMagic);
  std::int64_t clock = 1;
  ns_per_pair<true>(*page, calls / 10, clock);  // warm-up
  ns_per_pair<false>(*page, calls / 10, clock);
  std::vector<double> v1, v2;
  for (int r = 0; r < rounds; ++r) {
    v1.push_back(ns_per_pair<false>(*page, calls, clock));
    v2.push_back(ns_per_pair<true>(*page, calls, clock));
  }
  auto s = pg::read(*page);  // the accumulators did count (and the loop was not optimized away)
  if (s.op_calls[static_cast<int>(pg::Op::allreduce)] == 0) {
    std::fprintf(stderr, "page_cost: the page counted no call\n");
    return 1;
  }
  double min1 = *std::min_element(v1.begin(), v1.end()), min2 = *std::min_element(v2.begin(), v2.end());
  double med1 = median(v1), med2 = median(v2);
  std::printf("# progress page begin_call+end_call, %d alternating rounds of %ld calls\n", rounds, calls);
  std::printf("%-28s %10s %10s\n", "# ns per call", "min", "median");
  std::printf("%-28s %10.2f %10.2f\n", "without accumulators (v1)", min1, med1);
  std::printf("%-28s %10.2f %10.2f\n", "with accumulators (v2)", min2, med2);
  std::printf("%-28s %+10.2f %+10.2f\n", "difference", min2 - min1, med2 - med1);
  ::munmap(m, pg::kPageBytes);
  return 0;
}
