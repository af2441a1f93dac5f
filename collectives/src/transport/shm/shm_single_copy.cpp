// Shared-memory engine: the single-copy allreduce of large buffers. Every local rank owns a slice of
// the elements; it reads that slice of every peer's send buffer straight from the peer's memory
// (Linux cross-memory attach, process_vm_readv) in chunks that stay in its cache, reduces them with
// its own in rank order (the same order as every other path), writes the result into its own recv
// and straight into every peer's recv (process_vm_writev). Two syncs per call: one after which the
// buffer addresses are published, one after which every slice is written. Nothing passes through
// the segment's slots, so each rank moves about one memcpy of the buffer.
//
// Cross-memory attach needs ptrace access to the peer (same user, and under Yama's ptrace_scope 1 a
// descendant only; 2 and 3 forbid it). The first call that qualifies tries one read from every peer;
// when any rank cannot, every rank keeps the pipelined path for good (logged once at info).
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "../../reduce.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/params.hpp"
#include "shm_engine.hpp"
#include "shm_layout.hpp"

namespace dtrain::coll::shm {

namespace {

// Bytes read from each peer per step: 128 KiB, less with many peers (at most kScratchBytes in all),
// so the chunks of one step stay in the core's cache.
constexpr std::size_t kChunkBytes = 128u << 10;
constexpr std::size_t kScratchBytes = 1u << 20;

std::size_t chunk_bytes(int peers) {
  const std::size_t share = kScratchBytes / static_cast<std::size_t>(std::max(peers, 1)) / 4096 * 4096;
  return std::clamp<std::size_t>(share, 4096, kChunkBytes);
}

std::string ptrace_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  std::string v;
  return f >> v ? v : "absent";
}

// Moves len bytes between local and the peer's remote address; false with errno on failure.
bool cma(bool write, pid_t pid, void* local, std::uintptr_t remote, std::size_t len) {
  while (len > 0) {
    iovec l{local, len};
    iovec r{reinterpret_cast<void*>(remote), len};
    const ssize_t got = write ? ::process_vm_writev(pid, &l, 1, &r, 1, 0) : ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = EFAULT;
      return false;
    }
    local = static_cast<std::uint8_t*>(local) + got;
    remote += static_cast<std::size_t>(got);
    len -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

// Whether every local rank can reach every peer's memory: decided on the first call (each peer's
// pid word read where that peer sees it, which also proves the pid names the peer and not another
// process, e.g. in another pid namespace; the verdicts compared after a sync) and kept in the ranks'
// control words.
bool Engine::single_copy_ready(const OpDesc& d) {
  auto& mine = ctl_[me_];
  if (mine.cma.load(std::memory_order_relaxed) == 0) {
    int failed_errno = 0;
    for (int j = 0; j < n_ && failed_errno == 0; ++j) {
      if (j == me_) continue;
      std::int32_t seen = 0;
      const std::int32_t pid = ctl_[j].pid.load();
      if (!cma(false, pid, &seen, ctl_[j].cma_self.load(std::memory_order_relaxed), sizeof seen))
        failed_errno = errno;
      else if (seen != pid)
        failed_errno = ESRCH;  // that pid is another process
    }
    if (failed_errno != 0)
      DTRAIN_INFO(coll, "rank {}: shared-memory allreduce without cross-memory attach (process_vm_readv of a "
                  "local peer: {}; Yama ptrace_scope: {}); large allreduces go through the segment's slots",
                  granks_[me_], std::strerror(failed_errno), ptrace_scope());
    mine.cma.store(failed_errno == 0 ? 1 : 2, std::memory_order_relaxed);
    sync(d);  // every verdict published
  }
  for (int j = 0; j < n_; ++j)
    if (ctl_[j].cma.load(std::memory_order_relaxed) != 1) return false;
  return true;
}

[[noreturn]] void Engine::single_copy_fail(const OpDesc& d, int peer, bool write, int err) {
  const std::int32_t pid = ctl_[peer].pid.load();
  const auto who = granks_[static_cast<std::size_t>(peer)];
  if (err == ESRCH)
    throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} (pid {}) died during the copy", d.text(),
                                                 granks_[me_], who, pid));
  throw CollError(err == EFAULT ? DTRAIN_ERR_PEER : DTRAIN_ERR_SYSTEM,
                  fmt::format("{} on rank {}: {} rank {}'s buffer (pid {}) failed: {}", d.text(), granks_[me_],
                              write ? "writing into" : "reading", who, pid, std::strerror(err)));
}

// False (after the same syncs on every rank) when cross-memory attach is not available: the caller
// takes the pipelined path.
bool Engine::allreduce_single_copy(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  auto& mine = ctl_[me_];
  mine.cma_send.store(reinterpret_cast<std::uintptr_t>(send), std::memory_order_relaxed);
  mine.cma_recv.store(reinterpret_cast<std::uintptr_t>(recv), std::memory_order_relaxed);
  mine.cma_self.store(reinterpret_cast<std::uintptr_t>(&mine.pid), std::memory_order_relaxed);
  sync(d);  // addresses published, fingerprints checked
  if (!single_copy_ready(d)) return false;

  const std::size_t esz = dtype_size(d.dtype), align = 64 / esz;
  const auto n = static_cast<std::size_t>(n_), me = static_cast<std::size_t>(me_);
  const std::size_t piece = round_up((d.count + n - 1) / n, align);
  const std::size_t start = std::min(d.count, me * piece), end_el = std::min(d.count, start + piece);
  const std::size_t cbytes = chunk_bytes(n_ - 1), chunk = cbytes / esz;
  const int div = d.op == DTRAIN_AVG ? n_ : 1;
  thread_local std::vector<std::uint8_t> scratch;
  scratch.resize((n - 1) * cbytes + 64);
  auto* tmp = reinterpret_cast<std::uint8_t*>(round_up(reinterpret_cast<std::uintptr_t>(scratch.data()), 64));
  for (std::size_t off = start; off < end_el; off += chunk) {
    const std::size_t m = std::min(chunk, end_el - off), bytes = m * esz;
    for (int j = 0, k = 0; j < n_; ++j) {
      if (j == me_) {
        srcs_[static_cast<std::size_t>(j)] = send + off * esz;
        continue;
      }
      std::uint8_t* dst = tmp + static_cast<std::size_t>(k++) * cbytes;
      if (!cma(false, ctl_[j].pid.load(), dst, ctl_[j].cma_send.load(std::memory_order_relaxed) + off * esz, bytes))
        single_copy_fail(d, j, false, errno);
      srcs_[static_cast<std::size_t>(j)] = dst;
    }
    reduce_n(srcs_.data(), n_, recv + off * esz, nullptr, m, d.dtype, d.op, div);
    // A rank that failed stops writing into the others' buffers at the next chunk (they may return
    // and free them once they see the abort record).
    check_abort(d);
    for (int j = 0; j < n_; ++j)
      if (j != me_ &&
          !cma(true, ctl_[j].pid.load(), recv + off * esz, ctl_[j].cma_recv.load(std::memory_order_relaxed) + off * esz,
               bytes))
        single_copy_fail(d, j, true, errno);
  }
  sync(d);  // every slice written everywhere
  return true;
}

}  // namespace dtrain::coll::shm
