// Liveness through file locks on the segment (liveness.hpp).
#include "liveness.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "../../call.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::coll::shm::liveness {
namespace {

// The descriptors that hold a liveness lock in this process. pthread_atfork's handlers take the
// mutex around fork(), so a child sees a consistent list and closes every descriptor in it.
struct Held {
  struct Entry {
    int fd;
    const void* owner;
  };
  std::mutex mu;
  std::vector<Entry> fds;
};

Held& registry() {
  static Held* h = [] {
    auto* p = new Held;  // never destroyed: forks may come during static destruction
    ::pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); },
                     [] {
                       Held& r = registry();
                       for (const auto& e : r.fds) ::close(e.fd);
                       r.fds.clear();
                       r.mu.unlock();
                     });
    return p;
  }();
  return *h;
}

struct flock byte_lock(int slot) {
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = slot;
  l.l_len = 1;
  return l;
}

}  // namespace

void hold(int fd, int slot, const void* owner) {
  Held& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  struct flock l = byte_lock(slot);
  if (::fcntl(fd, F_OFD_SETLK, &l) != 0)
    throw CollError(DTRAIN_ERR_SYSTEM,
                    fmt::format("shared-memory setup: locking byte {} of the segment (how local ranks see that a "
                                "peer is alive) failed: {}; set DTRAIN_TRANSPORT=tcp where /dev/shm has no locks",
                                slot, errno_text(errno)));
  r.fds.push_back({fd, owner});
}

bool held(int fd, int slot) {
  struct flock l = byte_lock(slot);
  if (::fcntl(fd, F_OFD_GETLK, &l) != 0) return true;  // cannot tell: not dead
  return l.l_type != F_UNLCK;
}

void release(int fd, const void* owner) noexcept {
  Held& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  auto it = std::find_if(r.fds.begin(), r.fds.end(), [&](const Held::Entry& e) { return e.fd == fd && e.owner == owner; });
  if (it == r.fds.end()) return;  // closed by a fork (this process is the child)
  r.fds.erase(it);
  ::close(fd);
}

}  // namespace dtrain::coll::shm::liveness
