// The worker's side of the progress page (progress.hpp).
#include "progress.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "dtrain/common/log.hpp"
#include "dtrain/common/progress_page.hpp"

namespace dtrain::coll::progress {
namespace {

namespace pg = dtrain::progress;

struct Noted {
  pg::Op op = pg::Op::none;
  std::uint64_t seq = 0, bytes = 0;
};
thread_local Noted t_noted;

// The page named by DTRAIN_PROGRESS_FILE, mapped once per process; null without one.
pg::Page* page() {
  static pg::Page* mapped = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("DTRAIN_PROGRESS_FILE");
    if (path == nullptr || *path == '\0') return;
    int fd = ::open(path, O_RDWR | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(pg::kPageBytes)) {
      DTRAIN_DEBUG(coll, "progress page {}: not usable", path);
      if (fd >= 0) ::close(fd);
      return;
    }
    void* p = ::mmap(nullptr, pg::kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return;
    auto* page = static_cast<pg::Page*>(p);
    page->pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);
    page->version.store(pg::kVersion, std::memory_order_relaxed);
    page->magic.store(pg::kMagic, std::memory_order_release);
    mapped = page;
  });
  return mapped;
}

}  // namespace

void note(const OpDesc& d) {
  t_noted = {static_cast<pg::Op>(d.kind), d.seq, d.count * dtype_size(d.dtype)};
}

Scope::Scope() {
  pg::Page* p = page();
  if (p == nullptr || t_noted.op == pg::Op::none) return;
  pg::begin_call(*p, t_noted.op, t_noted.seq, t_noted.bytes);
  t_noted = {};
  active_ = true;
}

Scope::~Scope() {
  if (active_) pg::end_call(*page());
}

}  // namespace dtrain::coll::progress
