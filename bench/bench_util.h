/* Small helpers shared by the C benchmarks (bench/allreduce/coll_bench.c, bench/p2p/p2p_bench.c). */
#ifndef DTRAIN_BENCH_UTIL_H
#define DTRAIN_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Monotonic seconds. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "64K", "1M", "2G", "8" -> bytes. */
static inline size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

#endif
