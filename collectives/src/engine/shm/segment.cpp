// The shared-memory segment (segment.hpp): its layout, creation by local rank 0, opening by the
// others, the wait until every local rank mapped it, and the unlink by the last of them.
#include "segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "../../wait.hpp"
#include "liveness.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/shm_names.hpp"
#include "dtrain/common/system.hpp"

namespace dtrain::coll::shm {
namespace {

constexpr std::uint64_t kMagic = 0x3148536e69617274ull;  // "trainSH1"
constexpr std::size_t kMinRingBytes = 16 << 10;           // a point-to-point ring holds at least this
constexpr std::size_t kMaxRingBytes = 1 << 20;            // and at most this

[[noreturn]] void sys_fail(const std::string& what, int err) {
  throw CollError(DTRAIN_ERR_SYSTEM, fmt::format("{}: {}", what, errno_text(err)));
}

}  // namespace

Layout::Layout(int n, std::size_t slot, std::size_t p2p) : local_size(n) {
  const auto un = static_cast<std::size_t>(n);
  ctl_offset = round_up(sizeof(Header), 64);
  boxes_offset = round_up(ctl_offset + sizeof(RankCtl) * un, 4096);
  data_offset = round_up(boxes_offset + 2 * kBoxStride * un, 4096);
  slot_bytes = std::max<std::size_t>(round_up(slot, 4096), 4096);
  buf_bytes = 2 * slot_bytes / 3 / 64 * 64;
  rings_offset = data_offset + 2 * un * slot_bytes;
  if (n > 1)  // the budget's share, plus a page for headers and padding
    ring_bytes = std::clamp<std::size_t>(p2p / (un - 1) / 4096 * 4096, kMinRingBytes, kMaxRingBytes) + 4096;
  bytes = rings_offset + un * (un - 1) * (sizeof(Ring) + ring_bytes);
}

Segment::Segment(const SegmentOptions& o)
    : me_(o.local_rank),
      layout_(static_cast<int>(o.global_ranks.size()), o.slot_bytes, o.p2p_bytes),
      granks_(o.global_ranks),
      timeout_(o.timeout) {
  const int n = local_size();
  DTRAIN_CHECK(n >= 1 && n <= kMaxLocal && me_ >= 0 && me_ < n, "local rank {} of {}", me_, n);
  const auto deadline = Clock::now() + timeout_;
  const std::string name_key = o.key_prefix + "shm/name";
  int fd = -1;
  if (me_ == 0) {
    try {
      fd = create(o);
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
  map(o, fd, deadline, name_key);
}

int Segment::create(const SegmentOptions& o) {
  struct statvfs sv {};
  if (::statvfs("/dev/shm", &sv) == 0) {
    const auto avail = static_cast<std::size_t>(sv.f_bavail) * static_cast<std::size_t>(sv.f_frsize);
    if (avail < layout_.bytes)
      throw CollError(DTRAIN_ERR_SYSTEM,
                      fmt::format("not enough space in /dev/shm for the shared-memory engine: need {:.1f} MiB "
                                  "for {} local ranks, {:.1f} MiB free; enlarge /dev/shm (e.g. docker "
                                  "--shm-size), lower DTRAIN_SHM_SLOT_BYTES or DTRAIN_SHM_P2P_BYTES, or set "
                                  "DTRAIN_TRANSPORT=tcp",
                                  static_cast<double>(layout_.bytes) / 1048576.0, local_size(),
                                  static_cast<double>(avail) / 1048576.0));
  }
  std::string stem;
  try {
    stem = shm_names::env_prefix();
  } catch (const ConfigError& e) {
    throw CollError(DTRAIN_ERR_CONFIG, e.what());
  }
  std::random_device rd;
  const std::uint64_t nonce = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  name_ = fmt::format("/{}{}-{:016x}", stem, o.name_prefix, nonce);
  const int fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) sys_fail(fmt::format("shm_open {}", name_), errno);
  int err = 0;
  if (::ftruncate(fd, static_cast<off_t>(layout_.bytes)) != 0) err = errno;
  if (err == 0) err = ::posix_fallocate(fd, 0, static_cast<off_t>(layout_.bytes));
  if (err != 0) {
    ::close(fd);
    ::shm_unlink(name_.c_str());
    if (err == ENOSPC)
      throw CollError(DTRAIN_ERR_SYSTEM,
                      fmt::format("/dev/shm is full: could not reserve {:.1f} MiB for {}; free space in /dev/shm "
                                  "or set DTRAIN_TRANSPORT=tcp",
                                  static_cast<double>(layout_.bytes) / 1048576.0, name_));
    sys_fail(fmt::format("reserving {} bytes for {}", layout_.bytes, name_), err);
  }
  return fd;
}

void Segment::map(const SegmentOptions& o, int fd, Clock::time_point deadline, const std::string& name_key) {
  const int n = local_size();
  base_ = ::mmap(nullptr, layout_.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_err = errno;
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    ::close(fd);
    if (me_ == 0) ::shm_unlink(name_.c_str());
    sys_fail(fmt::format("mmap {} ({} bytes)", name_, layout_.bytes), map_err);
  }
  try {
    liveness::hold(fd, me_, this);  // before this rank counts as mapped: peers may ask from then on
  } catch (...) {
    ::close(fd);
    ::munmap(base_, layout_.bytes);
    base_ = nullptr;
    if (me_ == 0) ::shm_unlink(name_.c_str());
    throw;
  }
  fd_ = fd;
  hdr_ = static_cast<Header*>(base_);
  ctl_ = reinterpret_cast<RankCtl*>(at(layout_.ctl_offset));
  if (me_ == 0) {
    // Fresh pages are zero: atomics start at 0. Publish the layout, then the magic, then the name.
    hdr_->local_size = static_cast<std::uint32_t>(n);
    hdr_->slot_bytes = layout_.slot_bytes;
    hdr_->total_bytes = layout_.bytes;
    hdr_->abort_rank.store(-1);
    hdr_->magic.store(kMagic, std::memory_order_release);
    o.store->set(name_key, rdzv::as_bytes(name_));
  } else if (hdr_->magic.load(std::memory_order_acquire) != kMagic ||
             hdr_->local_size != static_cast<std::uint32_t>(n) || hdr_->total_bytes != layout_.bytes) {
    unmap();
    throw CollError(DTRAIN_ERR_CONFIG,
                    fmt::format("shared-memory segment {} does not match this rank's view ({} local ranks, slot "
                                "{} bytes): do all local ranks use the same LOCAL_WORLD_SIZE, "
                                "DTRAIN_SHM_SLOT_BYTES and DTRAIN_SHM_P2P_BYTES?",
                                name_, n, layout_.slot_bytes));
  }
  ctl_[me_].pid.store(static_cast<std::int32_t>(::getpid()));
  // The last rank to map the segment removes its name: from here on a crash leaves nothing behind.
  if (hdr_->mapped.fetch_add(1) + 1 == static_cast<std::uint32_t>(n)) ::shm_unlink(name_.c_str());
  // Wait (bounded) until every local rank has mapped it.
  while (hdr_->mapped.load() < static_cast<std::uint32_t>(n)) {
    if (Clock::now() >= deadline) {
      ::shm_unlink(name_.c_str());
      std::string missing;
      for (int j = 0; j < n; ++j)
        if (ctl_[j].pid.load() == 0) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", granks_[j]);
      unmap();
      throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("shared-memory setup: ranks [{}] did not attach within {}",
                                                      missing, seconds_text(timeout_)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  DTRAIN_DEBUG(coll, "shm segment {} mapped by {} local ranks ({} bytes)", name_, n, layout_.bytes);
}

Segment::~Segment() {
  if (base_ == nullptr) return;
  if (hdr_->mapped.load() < static_cast<std::uint32_t>(local_size())) ::shm_unlink(name_.c_str());
  unmap();
}

void Segment::unmap() noexcept {
  ::munmap(base_, layout_.bytes);
  base_ = nullptr;
  liveness::release(fd_, this);
  fd_ = -1;
}

bool Segment::alive(int rank) const {
  // pid 0: not mapped yet (the setup's own wait bounds that).
  return rank == me_ || ctl_[rank].pid.load() == 0 || liveness::held(fd_, rank);
}

void Segment::wake_collectives() const {
  hdr_->phase.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(hdr_->phase, hdr_->sleepers);
}

void Segment::ring_bell(int rank) const {
  auto& c = ctl_[rank];
  c.bell.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(c.bell, c.bell_sleepers);
}

}  // namespace dtrain::coll::shm
