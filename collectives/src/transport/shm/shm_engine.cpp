// Shared-memory engine. Every call starts with a sync whose arrival carries the call's fingerprint;
// after it each rank compares all fingerprints, so mismatched calls fail on every rank instead of
// hanging. Small messages: each rank copies its whole buffer into its slot, one sync, then every rank
// reduces all slots itself (same order everywhere). Large messages: pipelined rounds of reduce-scatter
// + allgather over the slots with one sync per round: after sync t a rank copies the others' reduced
// pieces of round t-1 out, reduces its own piece of round t (its own input read in place, the others'
// from their slots, one fused n-way pass writing the result to recv and to its slot) and copies the
// pieces of round t+1 that the others own into its slot; three rotating buffers make that safe.
// Waiting: an adaptive spin (longer while peers keep arriving within it; yielding instead of pausing
// when there are more local ranks than CPUs), then futex sleep in slices (abort, liveness and deadline
// checks between them).
#include "shm_engine.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "../../reduce.hpp"
#include "../../wait.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::coll::shm {

constexpr std::uint64_t kMagic = 0x3148536e69617274ull;  // "trainSH1"
constexpr int kMaxLocal = 1024;
constexpr std::size_t kSmallBytes = 32 * 1024;  // latency path up to this many bytes per rank
constexpr int kSpinGrowth = 20;                 // the adaptive spin reaches at most this x DTRAIN_COLL_SPIN_US

struct Engine::Header {
  std::atomic<std::uint64_t> magic;
  std::uint32_t local_size;
  std::uint32_t pad0;
  std::uint64_t slot_bytes;
  std::uint64_t total_bytes;
  alignas(64) std::atomic<std::uint32_t> mapped;
  alignas(64) std::atomic<std::uint32_t> count;   // arrivals at the current sync
  alignas(64) std::atomic<std::uint32_t> phase;   // bumped by the last arrival: the futex word
  std::atomic<std::uint32_t> sleepers;
  alignas(64) std::atomic<std::int32_t> abort_rank;  // -1: none
  std::atomic<std::uint32_t> abort_status;
  std::atomic<std::uint32_t> abort_ready;
  char abort_msg[1024];
};

struct alignas(64) Engine::RankCtl {
  // Hot line, read by every peer in every call: arrival epoch and the call's fingerprint.
  std::atomic<std::uint32_t> epoch;     // syncs passed
  std::uint32_t pad0;
  std::atomic<std::uint64_t> fp[2][3];  // per call parity: fp0, fp1, seq
  // Cold line, written by its rank, read by peers only on the slow path (timeouts, liveness).
  alignas(64) std::atomic<std::uint64_t> seq;  // last call this rank entered
  std::atomic<std::uint32_t> kind;   // its OpKind
  std::atomic<std::uint32_t> busy;   // 1 while inside the call
  std::atomic<std::uint32_t> state;  // 1: destroyed its communicator
  std::atomic<std::int32_t> pid;
};
static_assert(sizeof(Engine::RankCtl) == 128, "two cache lines per rank");

namespace {

std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// Allreduces of 32 MiB and more write recv with streaming (non-temporal) stores: the result is
// bigger than the caches anyway, and it saves the read-for-ownership of every recv line (measured:
// faster at 64 MiB, not at 16 MiB, hence the threshold).
constexpr std::size_t kStreamBytes = 32u << 20;

void copy_stream(void* dst_v, const void* src_v, std::size_t bytes) {
#if defined(__SSE2__)
  auto* dst = static_cast<std::uint8_t*>(dst_v);
  const auto* src = static_cast<const std::uint8_t*>(src_v);
  const std::size_t head = std::min(bytes, (16 - (reinterpret_cast<std::uintptr_t>(dst) & 15u)) & 15u);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), e);
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst_v, src_v, bytes);
#endif
}

void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

[[noreturn]] void sys_fail(const std::string& what, int err) {
  throw CollError(DTRAIN_ERR_SYSTEM, fmt::format("{}: {}", what, errno_text(err)));
}

}  // namespace

Engine::Engine(const Options& o)
    : me_(o.local_rank),
      n_(static_cast<int>(o.global_ranks.size())),
      granks_(o.global_ranks),
      timeout_(o.timeout),
      spin_us_(o.spin_us) {
  DTRAIN_CHECK(n_ >= 1 && n_ <= kMaxLocal && me_ >= 0 && me_ < n_, "local rank {} of {}", me_, n_);
  const std::size_t ctl_off = round_up(sizeof(Header), 64);
  data_offset_ = round_up(ctl_off + sizeof(RankCtl) * static_cast<std::size_t>(n_), 4096);
  slot_bytes_ = std::max<std::size_t>(round_up(o.slot_bytes, 4096), 4096);
  buf_bytes_ = 2 * slot_bytes_ / 3 / 64 * 64;
  spin_budget_us_ = spin_us_;
  {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    const int ncpu = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    oversubscribed_ = n_ > ncpu;
  }
  bytes_ = data_offset_ + 2 * static_cast<std::size_t>(n_) * slot_bytes_;
  const auto deadline = Clock::now() + timeout_;
  const std::string name_key = o.key_prefix + "shm/name";

  int fd = -1;
  if (me_ == 0) {
    try {
      fd = create_segment(o);
    } catch (const CollError& e) {
      // Tell the other local ranks at once instead of letting them wait for a name.
      try {
        o.store->set(name_key, rdzv::as_bytes(std::string("!") + e.what()));
      } catch (...) {
      }
      throw;
    }
  } else {
    std::string name;
    try {
      name = rdzv::to_string(o.store->get(name_key, timeout_));
    } catch (const TimeoutError&) {
      throw CollError(DTRAIN_ERR_TIMEOUT,
                      fmt::format("shared-memory setup: local rank 0 (rank {}) did not publish its segment within {}",
                                  granks_[0], seconds_text(timeout_)));
    }
    if (!name.empty() && name[0] == '!')
      throw CollError(DTRAIN_ERR_SYSTEM, fmt::format("shared-memory setup failed on local rank 0 (rank {}): {}",
                                                     granks_[0], name.substr(1)));
    name_ = name;
    fd = ::shm_open(name_.c_str(), O_RDWR, 0600);
    if (fd < 0) sys_fail(fmt::format("shm_open {} (created by rank {})", name_, granks_[0]), errno);
  }
  finish_setup(o, fd, ctl_off, deadline, name_key);
}

int Engine::create_segment(const Options& o) {
  int fd = -1;
  {
    struct statvfs sv {};
    if (::statvfs("/dev/shm", &sv) == 0) {
      const auto avail = static_cast<std::size_t>(sv.f_bavail) * static_cast<std::size_t>(sv.f_frsize);
      if (avail < bytes_)
        throw CollError(DTRAIN_ERR_SYSTEM,
                        fmt::format("not enough space in /dev/shm for the shared-memory engine: need {:.1f} MiB "
                                    "for {} local ranks, {:.1f} MiB free; enlarge /dev/shm (e.g. docker "
                                    "--shm-size), lower DTRAIN_SHM_SLOT_BYTES, or set DTRAIN_TRANSPORT=tcp",
                                    static_cast<double>(bytes_) / 1048576.0, n_,
                                    static_cast<double>(avail) / 1048576.0));
    }
    std::random_device rd;
    const std::uint64_t nonce = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    name_ = fmt::format("/{}-{:016x}", o.name_prefix, nonce);
    fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) sys_fail(fmt::format("shm_open {}", name_), errno);
    int err = 0;
    if (::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) err = errno;
    if (err == 0) err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
    if (err != 0) {
      ::close(fd);
      ::shm_unlink(name_.c_str());
      if (err == ENOSPC)
        throw CollError(DTRAIN_ERR_SYSTEM,
                        fmt::format("/dev/shm is full: could not reserve {:.1f} MiB for {}; free space in /dev/shm "
                                    "or set DTRAIN_TRANSPORT=tcp",
                                    static_cast<double>(bytes_) / 1048576.0, name_));
      sys_fail(fmt::format("reserving {} bytes for {}", bytes_, name_), err);
    }
  }
  return fd;
}

void Engine::finish_setup(const Options& o, int fd, std::size_t ctl_off, Clock::time_point deadline,
                          const std::string& name_key) {
  base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    if (me_ == 0) ::shm_unlink(name_.c_str());
    sys_fail(fmt::format("mmap {} ({} bytes)", name_, bytes_), map_err);
  }
  hdr_ = static_cast<Header*>(base_);
  ctl_ = reinterpret_cast<RankCtl*>(static_cast<std::uint8_t*>(base_) + ctl_off);
  if (me_ == 0) {
    // Fresh pages are zero: atomics start at 0. Publish the layout, then the magic, then the name.
    hdr_->local_size = static_cast<std::uint32_t>(n_);
    hdr_->slot_bytes = slot_bytes_;
    hdr_->total_bytes = bytes_;
    hdr_->abort_rank.store(-1);
    hdr_->magic.store(kMagic, std::memory_order_release);
    o.store->set(name_key, rdzv::as_bytes(name_));
  } else {
    if (hdr_->magic.load(std::memory_order_acquire) != kMagic || hdr_->local_size != static_cast<std::uint32_t>(n_) ||
        hdr_->total_bytes != bytes_) {
      ::munmap(base_, bytes_);
      base_ = nullptr;
      throw CollError(DTRAIN_ERR_CONFIG,
                      fmt::format("shared-memory segment {} does not match this rank's view ({} local ranks, slot "
                                  "{} bytes): do all local ranks use the same LOCAL_WORLD_SIZE and "
                                  "DTRAIN_SHM_SLOT_BYTES?",
                                  name_, n_, slot_bytes_));
    }
  }
  ctl_[me_].pid.store(static_cast<std::int32_t>(::getpid()));
  // The last rank to map the segment removes its name: from here on a crash leaves nothing behind.
  if (hdr_->mapped.fetch_add(1) + 1 == static_cast<std::uint32_t>(n_)) ::shm_unlink(name_.c_str());
  // Wait (bounded) until every local rank has mapped it.
  while (hdr_->mapped.load() < static_cast<std::uint32_t>(n_)) {
    if (Clock::now() >= deadline) {
      ::shm_unlink(name_.c_str());
      std::string missing;
      for (int j = 0; j < n_; ++j)
        if (ctl_[j].pid.load() == 0) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", granks_[j]);
      ::munmap(base_, bytes_);
      base_ = nullptr;
      throw CollError(DTRAIN_ERR_TIMEOUT,
                      fmt::format("shared-memory setup: ranks [{}] did not attach within {}", missing,
                                  seconds_text(timeout_)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  DTRAIN_DEBUG(coll, "shm segment {} mapped by {} local ranks ({} bytes)", name_, n_, bytes_);
}

Engine::~Engine() {
  if (base_ == nullptr) return;
  ctl_[me_].state.store(1, std::memory_order_seq_cst);
  hdr_->phase.fetch_add(0);  // order the state store before the wake
  futex_wake_all(hdr_->phase, hdr_->sleepers);
  if (hdr_->mapped.load() < static_cast<std::uint32_t>(n_)) ::shm_unlink(name_.c_str());
  ::munmap(base_, bytes_);
}

std::uint8_t* Engine::slot(int set, int rank) const {
  return static_cast<std::uint8_t*>(base_) + data_offset_ +
         (static_cast<std::size_t>(set) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(rank)) * buf_bytes_;
}

void Engine::abort(dtrain_status_t status, const std::string& msg) noexcept {
  if (hdr_ == nullptr) return;
  std::int32_t expected = -1;
  if (hdr_->abort_rank.compare_exchange_strong(expected, me_)) {
    std::size_t m = std::min(msg.size(), sizeof(hdr_->abort_msg) - 1);
    std::memcpy(hdr_->abort_msg, msg.data(), m);
    hdr_->abort_msg[m] = '\0';
    hdr_->abort_status.store(static_cast<std::uint32_t>(status));
    hdr_->abort_ready.store(1, std::memory_order_release);
  }
  hdr_->phase.fetch_add(0);
  // Wake sleepers; they see the abort record on their next check.
  futex_wake_all(hdr_->phase, hdr_->sleepers);
}

void Engine::begin(const OpDesc& d) {
  auto& c = ctl_[me_];
  const int par = static_cast<int>(calls_++ & 1u);
  c.fp[par][0].store(d.fp0(), std::memory_order_relaxed);
  c.fp[par][1].store(d.fp1(), std::memory_order_relaxed);
  c.fp[par][2].store(d.seq, std::memory_order_relaxed);
  c.kind.store(static_cast<std::uint32_t>(d.kind), std::memory_order_relaxed);
  c.seq.store(d.seq, std::memory_order_relaxed);
  c.busy.store(1, std::memory_order_release);
  first_sync_ = true;
}

void Engine::end() { ctl_[me_].busy.store(0, std::memory_order_release); }

void Engine::check_abort_and_peers(const OpDesc& d) {
  if (hdr_->abort_ready.load(std::memory_order_acquire) != 0) {
    const int who = hdr_->abort_rank.load();
    auto st = static_cast<dtrain_status_t>(hdr_->abort_status.load());
    if (st == DTRAIN_SUCCESS) st = DTRAIN_ERR_PEER;
    throw CollError(st, fmt::format("{} on rank {}: rank {} failed: {}", d.text(), granks_[me_],
                                    granks_[static_cast<std::size_t>(who)], hdr_->abort_msg));
  }
  const auto self = static_cast<std::int32_t>(::getpid());
  for (int j = 0; j < n_; ++j) {
    if (j == me_) continue;
    if (ctl_[j].state.load() == 1 && ctl_[j].epoch.load() < epoch_)
      throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} destroyed its communicator instead of "
                                                   "joining (it had reached {} #{})",
                                                   d.text(), granks_[me_], granks_[j],
                                                   op_kind_name(static_cast<OpKind>(ctl_[j].kind.load())),
                                                   ctl_[j].seq.load()));
    const std::int32_t pid = ctl_[j].pid.load();
    if (pid > 0 && pid != self && ::kill(pid, 0) != 0 && errno == ESRCH)
      throw CollError(DTRAIN_ERR_PEER,
                      fmt::format("{} on rank {}: rank {} (pid {}) died; it had reached {} #{}", d.text(),
                                  granks_[me_], granks_[j], pid,
                                  op_kind_name(static_cast<OpKind>(ctl_[j].kind.load())), ctl_[j].seq.load()));
  }
}

void Engine::fail_timeout(const OpDesc& d, std::uint32_t epoch) {
  std::string missing, where;
  for (int j = 0; j < n_; ++j) {
    const auto& c = ctl_[j];
    const bool arrived = c.epoch.load() >= epoch;
    if (!arrived) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", granks_[j]);
    where += fmt::format("; rank {}: {} {} #{}{}", granks_[j], c.busy.load() ? "in" : "last finished",
                         op_kind_name(static_cast<OpKind>(c.kind.load())), c.seq.load(),
                         arrived ? "" : " (not arrived)");
  }
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}: ranks [{}] never arrived{}",
                                                  d.text(), seconds_text(timeout_), granks_[me_], missing, where));
}

void Engine::sync(const OpDesc& d) {
  // Each rank publishes its own epoch (one cache line per rank, no shared counter) and waits until
  // every rank's epoch reached it. Sleepers wait on the shared phase word; an arrival only bumps it
  // and enters the kernel when someone sleeps.
  ++epoch_;
  ctl_[me_].epoch.store(epoch_, std::memory_order_seq_cst);
  if (hdr_->sleepers.load(std::memory_order_seq_cst) != 0) {
    hdr_->phase.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(hdr_->phase, hdr_->sleepers);
  }
  wait_all(d);
  if (first_sync_) {
    first_sync_ = false;
    check_fingerprints(d);
  }
}

void Engine::wait_all(const OpDesc& d) {
  auto all_arrived = [&] {
    for (int j = 0; j < n_; ++j)
      if (ctl_[j].epoch.load(std::memory_order_acquire) < epoch_) return false;
    return true;
  };
  if (all_arrived()) return;
  // 1. Spin while the peers are likely running. The budget (DTRAIN_COLL_SPIN_US up to kSpinGrowth times that)
  // doubles each time they arrive within it; after a sleep it becomes twice the whole wait when that
  // was short (a peer that was itself waking up: spinning through its wake-up next time breaks the
  // chain where each rank sleeps in turn and every call pays a futex wake-up) and falls back to
  // DTRAIN_COLL_SPIN_US when it was long (a peer busy elsewhere: sleep soon, burn less). With more
  // local ranks than CPUs a peer may be queued on this very core: the spin yields it the core instead
  // of pausing, and never grows.
  const auto t0 = Clock::now();
  const auto spin_until = t0 + std::chrono::microseconds(spin_budget_us_);
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (all_arrived()) {
        if (!oversubscribed_) spin_budget_us_ = std::min(spin_budget_us_ * 2, kSpinGrowth * spin_us_);
        return;
      }
      if (oversubscribed_) {
        ::sched_yield();
      } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
    if (Clock::now() >= spin_until) break;
  }
  // 2. Sleep in slices, checking abort records, peer liveness and the deadline between them.
  bool done = false;
  while (!done) {
    check_abort_and_peers(d);
    if (Clock::now() >= d.deadline) fail_timeout(d, epoch_);
    hdr_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t p = hdr_->phase.load(std::memory_order_seq_cst);
    done = all_arrived();
    if (!done) futex_wait(hdr_->phase, p, std::chrono::milliseconds(20));
    hdr_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    done = done || all_arrived();
  }
  const auto waited_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  const auto max_us = static_cast<std::int64_t>(kSpinGrowth) * spin_us_;
  spin_budget_us_ = oversubscribed_ || waited_us > max_us
                        ? spin_us_
                        : static_cast<int>(std::min(max_us, std::max<std::int64_t>(spin_us_, 2 * waited_us)));
}

void Engine::check_fingerprints(const OpDesc& d) {
  const int par = static_cast<int>((calls_ - 1) & 1u);
  bool bad = false;
  for (int j = 0; j < n_ && !bad; ++j)
    bad = ctl_[j].fp[par][0].load(std::memory_order_relaxed) != d.fp0() ||
          ctl_[j].fp[par][1].load(std::memory_order_relaxed) != d.fp1() ||
          ctl_[j].fp[par][2].load(std::memory_order_relaxed) != d.seq;
  if (!bad) return;
  std::string calls;
  for (int j = 0; j < n_; ++j) {
    const auto& f = ctl_[j].fp[par];
    calls += fmt::format("; rank {}: {} #{}", granks_[j], describe_fingerprint(f[0].load(), f[1].load()), f[2].load());
  }
  throw CollError(DTRAIN_ERR_MISMATCH,
                  fmt::format("mismatched collective calls at call #{} (every rank must make the same calls with the "
                              "same count, dtype, op and root){}",
                              d.seq, calls));
}

void Engine::barrier(const OpDesc& d) {
  begin(d);
  sync(d);
  end();
}

void Engine::allreduce(const OpDesc& d, const void* send_v, void* recv_v) {
  begin(d);
  const std::size_t esz = dtype_size(d.dtype);
  const std::size_t bytes = d.count * esz;
  const auto* send = static_cast<const std::uint8_t*>(send_v);
  auto* recv = static_cast<std::uint8_t*>(recv_v);
  const int div = d.op == DTRAIN_AVG ? n_ : 1;
  if (n_ == 1 || bytes == 0) {
    sync(d);
    if (n_ == 1 && bytes != 0) {
      const void* srcs[1] = {send};
      reduce_n(srcs, 1, recv, nullptr, d.count, d.dtype, d.op, 1);
    }
    end();
    return;
  }
  std::vector<const void*> srcs(static_cast<std::size_t>(n_));
  if (bytes <= std::min(kSmallBytes, buf_bytes_)) {
    // Latency path: everyone publishes everything, everyone reduces everything in rank order.
    const int set = next_set();
    std::memcpy(slot(set, me_), send, bytes);
    sync(d);
    for (int j = 0; j < n_; ++j) srcs[static_cast<std::size_t>(j)] = slot(set, j);
    reduce_n(srcs.data(), n_, recv, nullptr, d.count, d.dtype, d.op, div);
    end();
    return;
  }
  // Bandwidth path: rounds of up to n pieces; rank j reduces piece j of every rank's contribution.
  // Round t lives in buffer set (first + t) % 3. After sync t: copy out round t-1 (the others'
  // reduced pieces), reduce round t, copy in round t+1; then sync t+1. A buffer is written again only
  // in round t+3, after sync t+2, by which every rank has left round t.
  const std::size_t align = 64 / esz;  // elements per cache line
  const std::size_t piece_cap = (buf_bytes_ / static_cast<std::size_t>(n_)) / esz / align * align;
  DTRAIN_CHECK(piece_cap > 0, "slot too small");
  const std::size_t round_cap = piece_cap * static_cast<std::size_t>(n_);
  const std::size_t rounds = (d.count + round_cap - 1) / round_cap;
  const std::uint64_t first = round_;
  round_ += rounds;
  struct Round {
    std::size_t off = 0, m = 0, p = 0;
    int set = 0;
  };
  auto geometry = [&](std::size_t t) {
    Round r;
    r.off = t * round_cap;
    r.m = std::min(round_cap, d.count - r.off);
    r.p = std::min(piece_cap, round_up((r.m + static_cast<std::size_t>(n_) - 1) / static_cast<std::size_t>(n_), align));
    r.set = static_cast<int>((first + t) % 3u);
    return r;
  };
  auto piece = [](const Round& r, int j, std::size_t& start, std::size_t& len) {
    start = std::min(r.m, static_cast<std::size_t>(j) * r.p);
    len = std::min(r.m, start + r.p) - start;
  };
  auto copy_in = [&](const Round& r) {
    std::uint8_t* mine = slot(r.set, me_);
    for (int j = 0; j < n_; ++j) {
      if (j == me_) continue;
      std::size_t s, l;
      piece(r, j, s, l);
      if (l) std::memcpy(mine + s * esz, send + (r.off + s) * esz, l * esz);
    }
  };
  const bool stream = bytes >= kStreamBytes;
  auto reduce_own = [&](const Round& r) {
    std::size_t s, l;
    piece(r, me_, s, l);
    if (!l) return;
    for (int j = 0; j < n_; ++j)
      srcs[static_cast<std::size_t>(j)] = j == me_ ? send + (r.off + s) * esz : slot(r.set, j) + s * esz;
    std::uint8_t* shared = slot(r.set, me_) + s * esz;
    if (stream) {
      // Reduce into the (cached) slot, then stream that to recv.
      reduce_n(srcs.data(), n_, shared, nullptr, l, d.dtype, d.op, div);
      copy_stream(recv + (r.off + s) * esz, shared, l * esz);
    } else {
      reduce_n(srcs.data(), n_, recv + (r.off + s) * esz, shared, l, d.dtype, d.op, div);
    }
  };
  auto copy_out = [&](const Round& r) {
    for (int j = 0; j < n_; ++j) {
      if (j == me_) continue;
      std::size_t s, l;
      piece(r, j, s, l);
      if (!l) continue;
      if (stream)
        copy_stream(recv + (r.off + s) * esz, slot(r.set, j) + s * esz, l * esz);
      else
        std::memcpy(recv + (r.off + s) * esz, slot(r.set, j) + s * esz, l * esz);
    }
  };
  copy_in(geometry(0));
  for (std::size_t t = 0; t < rounds; ++t) {
    sync(d);
    if (t > 0) copy_out(geometry(t - 1));
    reduce_own(geometry(t));
    if (t + 1 < rounds) copy_in(geometry(t + 1));
  }
  sync(d);
  copy_out(geometry(rounds - 1));
  if (stream) stream_fence();
  end();
}

void Engine::broadcast(const OpDesc& d, const void* send_v, void* recv_v, int root) {
  begin(d);
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  const auto* send = static_cast<const std::uint8_t*>(send_v);
  auto* recv = static_cast<std::uint8_t*>(recv_v);
  if (n_ == 1 || bytes == 0) {
    sync(d);
    if (bytes != 0 && send != recv) std::memmove(recv, send, bytes);
    end();
    return;
  }
  for (std::size_t off = 0; off < bytes; off += buf_bytes_) {
    const std::size_t len = std::min(buf_bytes_, bytes - off);
    const int set = next_set();
    if (me_ == root) std::memcpy(slot(set, root), send + off, len);
    sync(d);
    if (me_ != root) std::memcpy(recv + off, slot(set, root), len);
  }
  if (me_ == root && send != recv) std::memmove(recv, send, bytes);
  end();
}

void Engine::allgather(const OpDesc& d, const void* send_v, void* recv_v) {
  begin(d);
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  const auto* send = static_cast<const std::uint8_t*>(send_v);
  auto* recv = static_cast<std::uint8_t*>(recv_v);
  if (bytes == 0) {
    sync(d);
    end();
    return;
  }
  for (std::size_t off = 0; off < bytes; off += buf_bytes_) {
    const std::size_t len = std::min(buf_bytes_, bytes - off);
    const int set = next_set();
    std::memcpy(slot(set, me_), send + off, len);
    sync(d);
    for (int j = 0; j < n_; ++j) {
      std::uint8_t* dst = recv + static_cast<std::size_t>(j) * bytes + off;
      if (j == me_ && dst == send + off) continue;
      std::memcpy(dst, slot(set, j), len);
    }
  }
  end();
}

void Engine::reduce_scatter(const OpDesc& d, const void* send_v, void* recv_v) {
  begin(d);
  const std::size_t esz = dtype_size(d.dtype);
  const auto* send = static_cast<const std::uint8_t*>(send_v);
  auto* recv = static_cast<std::uint8_t*>(recv_v);
  const int div = d.op == DTRAIN_AVG ? n_ : 1;
  if (d.count == 0 || n_ == 1) {
    sync(d);
    if (d.count != 0) {
      const void* srcs[1] = {send};
      reduce_n(srcs, 1, recv, nullptr, d.count, d.dtype, d.op, 1);
    }
    end();
    return;
  }
  const std::size_t piece_cap = (buf_bytes_ / static_cast<std::size_t>(n_)) / esz / (64 / esz) * (64 / esz);
  std::vector<const void*> srcs(static_cast<std::size_t>(n_));
  for (std::size_t off = 0; off < d.count; off += piece_cap) {
    const std::size_t len = std::min(piece_cap, d.count - off);
    const int set = next_set();
    std::uint8_t* mine = slot(set, me_);
    for (int j = 0; j < n_; ++j)
      if (j != me_)
        std::memcpy(mine + static_cast<std::size_t>(j) * piece_cap * esz,
                    send + (static_cast<std::size_t>(j) * d.count + off) * esz, len * esz);
    sync(d);
    for (int j = 0; j < n_; ++j)
      srcs[static_cast<std::size_t>(j)] =
          j == me_ ? send + (static_cast<std::size_t>(me_) * d.count + off) * esz
                   : slot(set, j) + static_cast<std::size_t>(me_) * piece_cap * esz;
    reduce_n(srcs.data(), n_, recv + off * esz, nullptr, len, d.dtype, d.op, div);
  }
  end();
}

}  // namespace dtrain::coll::shm
