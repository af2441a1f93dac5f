#pragma once
// Shared-memory engine for the ranks of one host. One segment per communicator and host, created by
// local rank 0 and unlinked as soon as every local rank has mapped it, so nothing is left in /dev/shm
// after a crash. Layout (shm_layout.hpp): header (barrier words, abort record), one control block per
// local rank (progress words, per-call fingerprints), then each rank's data area of 2 x slot_bytes,
// split into three rotating buffers (a buffer is reused three rounds later, after every rank has left
// it; three, not two, so the bandwidth path needs only one sync per pipelined round).
// Files: shm_engine.cpp (segment setup), shm_sync.cpp (syncs, waiting, fingerprints, failures),
// shm_collectives.cpp (the algorithms).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../transport.hpp"
#include "dtrain/rendezvous/store.hpp"

namespace dtrain::coll::shm {

struct Options {
  int local_rank = 0;
  std::vector<int> global_ranks;   // world rank of each local rank (for messages)
  rdzv::Store* store = nullptr;
  std::string key_prefix;          // store keys of this communicator and host, e.g. "coll/3/node0/"
  std::string name_prefix;         // segment name stem, e.g. "dtrain-<run>-g<gen>"
  std::chrono::milliseconds timeout{300000};
  std::size_t slot_bytes = 2 << 20;
  int spin_us = 50;
};

class Engine final : public Transport {
 public:
  explicit Engine(const Options& options);  // maps (or creates) the segment; throws CollError
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int local_rank() const { return me_; }
  int local_size() const { return n_; }

  const char* name() const noexcept override { return "shm"; }
  void barrier(const OpDesc& d) override;
  void allreduce(const OpDesc& d, const void* send, void* recv) override;
  // From local rank d.root.
  void broadcast(const OpDesc& d, const void* send, void* recv) override;
  void allgather(const OpDesc& d, const void* send, void* recv) override;
  void reduce_scatter(const OpDesc& d, const void* send, void* recv) override;
  // Records a failure so waiting local ranks stop at once with the same status.
  void abort(dtrain_status_t status, const std::string& msg) noexcept override;

  struct Header;
  struct RankCtl;

 private:
  struct Rounds;

  // setup (shm_engine.cpp)
  int create_segment(const Options& o);
  void finish_setup(const Options& o, int fd, std::size_t ctl_off, Clock::time_point deadline,
                    const std::string& name_key);
  // syncs and failures (shm_sync.cpp)
  void begin(const OpDesc& d);
  void end();
  void sync(const OpDesc& d);
  void check_fingerprints(const OpDesc& d);
  [[noreturn]] void fail_timeout(const OpDesc& d, std::uint32_t epoch);
  void check_abort_and_peers(const OpDesc& d);
  void wait_all(const OpDesc& d);
  // algorithms (shm_collectives.cpp)
  void allreduce_small(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  void allreduce_pipelined(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);

  std::uint8_t* slot(int set, int rank) const {
    return static_cast<std::uint8_t*>(base_) + data_offset_ +
           (static_cast<std::size_t>(set) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(rank)) *
               buf_bytes_;
  }
  int next_set() { return static_cast<int>(round_++ % 3u); }

  int me_ = 0;
  int n_ = 1;
  std::vector<int> granks_;
  std::chrono::milliseconds timeout_;
  int spin_us_ = 50;
  std::string name_;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t slot_bytes_ = 0;
  std::size_t buf_bytes_ = 0;   // one of the three rotating buffers of a rank's data area
  int spin_budget_us_ = 0;      // adaptive spin of a wait (spin_us_ .. 20 x spin_us_)
  bool oversubscribed_ = false; // more local ranks than CPUs this process may run on
  std::size_t data_offset_ = 0;
  Header* hdr_ = nullptr;
  RankCtl* ctl_ = nullptr;
  std::uint32_t epoch_ = 0;     // syncs this rank passed
  std::uint64_t round_ = 0;     // slot-set rounds this rank started
  std::uint64_t calls_ = 0;     // engine calls made (fingerprint slot parity)
  bool first_sync_ = false;     // the next sync is the first of a call: check fingerprints
};

}  // namespace dtrain::coll::shm
