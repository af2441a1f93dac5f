// The worker's side of the progress page (progress.hpp).
#include "progress.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "dtrain/common/log.hpp"
#include "dtrain/common/progress_page.hpp"

namespace dtrain::coll::progress {
namespace {

namespace pg = dtrain::progress;

// The page's op numbers are OpKind's (Scope publishes d->kind as is).
static_assert(static_cast<int>(pg::Op::comm_split) == static_cast<int>(OpKind::comm_split));
static_assert(static_cast<int>(pg::Op::recv) == static_cast<int>(OpKind::recv));
static_assert(static_cast<int>(pg::Op::reduce) == static_cast<int>(OpKind::reduce));
static_assert(static_cast<int>(pg::Op::alltoallv) == static_cast<int>(OpKind::alltoallv));
static_assert(static_cast<int>(pg::Op::recv_any) == static_cast<int>(OpKind::recv_any));

// The page named by DTRAIN_PROGRESS_FILE, mapped once per process; null without one.
pg::Page* map_page() {
  const char* path = std::getenv("DTRAIN_PROGRESS_FILE");
  if (path == nullptr || *path == '\0') return nullptr;
  int fd = ::open(path, O_RDWR | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(pg::kPageBytes)) {
    DTRAIN_DEBUG(coll, "progress page {}: not usable", path);
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, pg::kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return nullptr;
  auto* page = static_cast<pg::Page*>(p);
  page->pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);
  page->version.store(pg::kVersion, std::memory_order_relaxed);
  page->magic.store(pg::kMagic, std::memory_order_release);
  return page;
}

pg::Page* page() {
  static pg::Page* const mapped = map_page();
  return mapped;
}

std::int64_t ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Scope::Scope(const OpDesc* d) {
  if (d == nullptr) return;
  pg::Page* p = page();
  if (p == nullptr) return;
  pg::begin_call(*p, static_cast<pg::Op>(d->kind), d->seq, d->count * dtype_size(d->dtype), ns(d->start));
  active_ = true;
}

Scope::~Scope() {
  if (active_) pg::end_call(*page(), ns(coarse_now()));
}

}  // namespace dtrain::coll::progress
