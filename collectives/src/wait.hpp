#pragma once
// Waiting on a 32-bit word in (shared) memory: spin briefly, then sleep in FUTEX_WAIT so that many
// ranks on few cores do not starve each other. The waker calls wake() after changing the word; it
// only enters the kernel when someone sleeps.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace dtrain::coll {

// The CPU's spin-wait hint (pause on x86, yield on arm64): one step of a busy wait.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins up to spin_us microseconds until word != old. Returns true when it changed.
bool spin_until_changed(const std::atomic<std::uint32_t>& word, std::uint32_t old, int spin_us);
// Sleeps until word != old, a wake, or `slice` passes (whichever first). Announces itself in sleepers.
void futex_sleep(std::atomic<std::uint32_t>& word, std::uint32_t old, std::atomic<std::uint32_t>& sleepers,
                 std::chrono::microseconds slice);
// Sleeps while word == old, until a wake or `slice` passes (the caller counts itself in sleepers).
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t old, std::chrono::microseconds slice);
// Wakes every sleeper on word (only a syscall when sleepers > 0).
void futex_wake_all(std::atomic<std::uint32_t>& word, const std::atomic<std::uint32_t>& sleepers);

}  // namespace dtrain::coll
