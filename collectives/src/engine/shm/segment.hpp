#pragma once
// The shared-memory segment of one communicator on one host: its layout and its mapping. Local rank
// 0 creates it (segment.cpp: room checked in /dev/shm first, mode 0600, O_EXCL, a name no other job
// can guess: DTRAIN_SHM_PREFIX, the run and generation, 64 random bits), reserves its pages and
// publishes the name in the store (or "!" and the reason, so the others fail at once); the others
// open it and check that its layout is their own. Every rank then waits (bounded) until all have
// mapped it; the last to map it unlinks the name, so a crash leaves nothing in /dev/shm.
//
// Layout, the same in every rank's mapping:
//   Header       the collectives' futex word and sleepers, the abort record
//   RankCtl x n  per local rank: what it is doing (call, fingerprints), its doorbell (p2p)
//   boxes        per local rank two latency-path boxes (boxes.hpp)
//   data         per local rank 2 x slot_bytes in three rotating buffers (slots.hpp)
//   rings        one point-to-point ring per ordered pair of local ranks (rings.hpp)
// The segment also says whether a local rank's process is still there (alive()): every rank holds
// a lock on its own byte of the segment's file for as long as it has the segment open
// (liveness.hpp), which the kernel drops when the process exits, whatever its PID namespace.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../../call.hpp"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::shm {

constexpr int kMaxLocal = 1024;

struct SegmentOptions {
  int local_rank = 0;
  std::vector<int> global_ranks;  // world rank of each local rank (for messages)
  rdzv::Store* store = nullptr;
  std::string key_prefix;         // store keys of this communicator and host, e.g. "coll/3/node0/"
  std::string name_prefix;        // segment name stem, e.g. "dtrain-<run>-g<gen>"
  std::chrono::milliseconds timeout{300000};
  std::size_t slot_bytes = 2 << 20;
  std::size_t p2p_bytes = 2 << 20;  // one rank's receive rings together
};

struct Header {
  std::atomic<std::uint64_t> magic;
  std::uint32_t local_size;
  std::uint32_t pad0;
  std::uint64_t slot_bytes;
  std::uint64_t total_bytes;
  alignas(64) std::atomic<std::uint32_t> mapped;
  alignas(64) std::atomic<std::uint32_t> phase;     // the collectives' futex word: bumped to wake sleepers
  std::atomic<std::uint32_t> sleepers;
  alignas(64) std::atomic<std::int32_t> abort_rank;  // -1: none
  std::atomic<std::uint32_t> abort_status;
  std::atomic<std::uint32_t> abort_ready;
  char abort_msg[1024];
};

struct alignas(64) RankCtl {
  // Hot line, written by its rank in every call: its arrivals and the call's fingerprint.
  std::atomic<std::uint64_t> epoch;     // syncs reached (kGivenUp: a peer gave up on the next one)
  std::atomic<std::uint64_t> fp[2][3];  // per engine-call parity: fp0, fp1, seq
  // Cold line, written by its rank, read by peers only on the slow path (timeouts, liveness).
  alignas(64) std::atomic<std::uint64_t> seq;  // last call this rank entered
  std::atomic<std::uint32_t> kind;   // its OpKind
  std::atomic<std::uint32_t> busy;   // 1 while inside the call
  std::atomic<std::uint32_t> state;  // 1: destroyed its communicator
  std::atomic<std::int32_t> pid;     // in its own PID namespace (messages only); 0 until it mapped the segment
  // Point-to-point line: the doorbell peers ring when they change one of this rank's rings (a
  // message or free space for it), the futex word it sleeps on; and what it is doing, for messages.
  alignas(64) std::atomic<std::uint32_t> bell;
  std::atomic<std::uint32_t> bell_sleepers;
  std::atomic<std::uint32_t> p2p_busy;   // 1 while inside a point-to-point call
  std::atomic<std::int32_t> p2p_to;      // local rank it sends to, -1: none
  std::atomic<std::int32_t> p2p_from;    // local rank it receives from, -1: none
  std::atomic<std::uint64_t> p2p_sseq;   // message number of that send
  std::atomic<std::uint64_t> p2p_rseq;   // and of that receive
};
static_assert(sizeof(RankCtl) == 192, "three cache lines per rank");

// Set in a rank's arrival word (RankCtl::epoch, BoxLine::flag) by a peer that gave up on the sync
// or box call this rank had not reached yet: the rank can no longer arrive there, so no rank passes
// it (barrier.hpp, boxes.hpp), and every rank fails the call.
constexpr std::uint64_t kGivenUp = std::uint64_t{1} << 63;

// Whether an arrival word's value v says its rank reached target. A mark (set only on a word below
// the marker's target) keeps the number: a rank marked for its next sync still reached this one,
// where slower ranks may still wait for it.
inline bool reached(std::uint64_t v, std::uint64_t target) { return (v & ~kGivenUp) >= target; }
// This rank arrives: its word moves from prev to next, unless a peer gave up on it first (false).
// The compare-exchange decides between the two, so a sync passes on every rank or on none.
inline bool arrive(std::atomic<std::uint64_t>& word, std::uint64_t prev, std::uint64_t next) {
  return word.compare_exchange_strong(prev, next, std::memory_order_seq_cst);
}
// A peer's word, unless it reached target, is marked kGivenUp: true when it is marked (by this rank
// or another), false when its rank reached target after all.
inline bool give_up_on(std::atomic<std::uint64_t>& word, std::uint64_t target) {
  std::uint64_t v = word.load(std::memory_order_acquire);
  while (!reached(v, target))  // marked below target: given up for target too, whoever marked it
    if ((v & kGivenUp) != 0 || word.compare_exchange_weak(v, v | kGivenUp, std::memory_order_seq_cst)) return true;
  return false;
}

// A latency-path box's first cache line: the call's fingerprint, up to 40 bytes of data inline, and
// the flag (the number of the box call that wrote the box, stored last); kBoxBytes of data follow.
struct alignas(64) BoxLine {
  std::uint64_t fp0, fp1;
  std::uint8_t data[40];
  std::atomic<std::uint64_t> flag;  // 0: none yet
};
static_assert(sizeof(BoxLine) == 64, "one cache line");

// The control of one point-to-point ring (sender -> receiver): positions count bytes since setup,
// each on its own cache line; the ring's data follows.
struct Ring {
  alignas(64) std::atomic<std::uint64_t> head;  // written by the sender: bytes put in
  alignas(64) std::atomic<std::uint64_t> tail;  // written by the receiver: bytes taken out
};
static_assert(sizeof(Ring) == 128, "two cache lines of ring control");

// Allreduces of up to this many bytes per rank take the latency path (boxes.hpp).
constexpr std::size_t kBoxBytes = 4096;
constexpr std::size_t kBoxStride = sizeof(BoxLine) + kBoxBytes;

inline std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// Where things are in a segment of n local ranks, in bytes from its start.
struct Layout {
  Layout(int n, std::size_t slot_bytes, std::size_t p2p_bytes);
  int local_size = 1;
  std::size_t bytes = 0;        // the whole segment
  std::size_t slot_bytes = 0;   // one rank's data area holds two
  std::size_t buf_bytes = 0;    // one of the three rotating buffers of a rank's data area
  std::size_t ctl_offset = 0;
  std::size_t boxes_offset = 0;
  std::size_t data_offset = 0;
  std::size_t rings_offset = 0;
  std::size_t ring_bytes = 0;   // data bytes of one ring (a multiple of 4096)
};

class Segment {
 public:
  // Creates or opens the segment and waits until every local rank mapped it; throws CollError.
  explicit Segment(const SegmentOptions& options);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int local_rank() const { return me_; }
  int local_size() const { return layout_.local_size; }
  const Layout& layout() const { return layout_; }
  const std::string& name() const { return name_; }

  Header& header() const { return *hdr_; }
  RankCtl& ctl(int rank) const { return ctl_[rank]; }
  BoxLine* box(int rank, std::uint64_t parity) const {
    const std::size_t index = static_cast<std::size_t>(rank) * 2 + static_cast<std::size_t>(parity & 1u);
    return reinterpret_cast<BoxLine*>(at(layout_.boxes_offset + index * kBoxStride));
  }
  // Rank `rank`'s buffer of slot set `set` (0..2).
  std::uint8_t* slot(int set, int rank) const {
    return at(layout_.data_offset +
              (static_cast<std::size_t>(set) * static_cast<std::size_t>(local_size()) + static_cast<std::size_t>(rank)) *
                  layout_.buf_bytes);
  }
  Ring* ring(int from, int to) const {
    const int idx = from * (local_size() - 1) + (to < from ? to : to - 1);
    return reinterpret_cast<Ring*>(
        at(layout_.rings_offset + static_cast<std::size_t>(idx) * (sizeof(Ring) + layout_.ring_bytes)));
  }
  static std::uint8_t* ring_data(const Ring* r) { return reinterpret_cast<std::uint8_t*>(const_cast<Ring*>(r)) + sizeof(Ring); }

  // Whether local rank `rank`'s process still has the segment open (it has not exited, been killed
  // or become a zombie), whatever PID namespace it runs in; true for this rank.
  bool alive(int rank) const;
  // Wakes every rank sleeping in a collective wait (on the header's phase word).
  void wake_collectives() const;
  // Rings local rank `rank`'s doorbell: it wakes if it sleeps in a point-to-point wait.
  void ring_bell(int rank) const;

 private:
  int create(const SegmentOptions& o);
  void map(const SegmentOptions& o, int fd, Clock::time_point deadline, const std::string& name_key);
  std::uint8_t* at(std::size_t offset) const { return static_cast<std::uint8_t*>(base_) + offset; }
  // Unmaps the segment and closes fd_, dropping this rank's liveness lock.
  void unmap() noexcept;

  int me_;
  Layout layout_;
  std::vector<int> granks_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  int fd_ = -1;  // kept open: this rank's liveness lock lives on it
  void* base_ = nullptr;
  Header* hdr_ = nullptr;
  RankCtl* ctl_ = nullptr;
};

}  // namespace dtrain::coll::shm
