#include "wait.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace dtrain::coll {
namespace {

std::uint32_t* raw(const std::atomic<std::uint32_t>& word) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return const_cast<std::uint32_t*>(reinterpret_cast<const std::uint32_t*>(&word));
}

}  // namespace

bool spin_until_changed(const std::atomic<std::uint32_t>& word, std::uint32_t old, int spin_us) {
  if (word.load(std::memory_order_acquire) != old) return true;
  if (spin_us <= 0) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (word.load(std::memory_order_acquire) != old) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return false;
  }
}

void futex_sleep(std::atomic<std::uint32_t>& word, std::uint32_t old, std::atomic<std::uint32_t>& sleepers,
                 std::chrono::microseconds slice) {
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (word.load(std::memory_order_seq_cst) == old) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(slice.count() / 1000000);
    ts.tv_nsec = static_cast<long>((slice.count() % 1000000) * 1000);
    // Shared (not PRIVATE) futex: the word may live in a segment mapped by several processes.
    syscall(SYS_futex, raw(word), FUTEX_WAIT, old, &ts, nullptr, 0);
  }
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t old, std::chrono::microseconds slice) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(slice.count() / 1000000);
  ts.tv_nsec = static_cast<long>((slice.count() % 1000000) * 1000);
  syscall(SYS_futex, raw(word), FUTEX_WAIT, old, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word, const std::atomic<std::uint32_t>& sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) == 0) return;
  syscall(SYS_futex, raw(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace dtrain::coll
