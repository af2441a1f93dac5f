#pragma once
// Shared-memory engine for the ranks of one host: one segment per communicator and host, created by
// local rank 0 and unlinked once every local rank has mapped it (nothing is left in /dev/shm after a
// crash). Layout (shm_layout.hpp): header (barrier words, abort record), a control block per local
// rank (progress words, fingerprints), two latency-path boxes per local rank, each rank's data area
// (2 x slot_bytes in three rotating buffers, so the pipelined path needs one sync per round), and a
// point-to-point ring per ordered pair of local ranks (Options::p2p_bytes per receiver, over its peers).
// Files: shm_engine.cpp (setup), shm_sync.cpp (syncs, waits, fingerprints, failures),
// shm_collectives.cpp (the algorithms), shm_box.cpp (allreduces up to kBoxBytes without a sync),
// shm_p2p.cpp (point-to-point through the rings).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../engine.hpp"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::shm {

// Allreduces of up to this many bytes per rank take the latency path (shm_box.cpp).
constexpr std::size_t kBoxBytes = 4096;

struct Options {
  int local_rank = 0;
  std::vector<int> global_ranks;   // world rank of each local rank (for messages)
  rdzv::Store* store = nullptr;
  std::string key_prefix;          // store keys of this communicator and host, e.g. "coll/3/node0/"
  std::string name_prefix;         // segment name stem, e.g. "dtrain-<run>-g<gen>"
  std::chrono::milliseconds timeout{300000};
  std::size_t slot_bytes = 2 << 20;
  std::size_t p2p_bytes = 2 << 20;  // one rank's receive rings together
  int spin_us = 50;
};

class Engine final : public coll::Engine {
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
  // Peers are local ranks (shm_p2p.cpp).
  void sendrecv(const P2pMsg* out, const P2pMsg* in) override;
  Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) override;
  // Records a failure so waiting local ranks stop at once with the same status.
  void abort(dtrain_status_t status, const std::string& msg) noexcept override;

  // Point-to-point in steps, for the hierarchical engine, which progresses a shm and a tcp direction
  // together: p2p_begin() once, then until finished(): p2p_step() (never blocks; true when it moved
  // bytes), and when nothing moved either p2p_check() (throws for an abort record, a dead or departed
  // peer or the deadline) or p2p_wait() (spins, checks, then sleeps up to 20 ms); p2p_end() at the end.
  struct P2pOut {
    const P2pMsg* m = nullptr;
    std::uint64_t total = 0, done = 0;  // frame bytes
    bool finished() const { return m == nullptr || (total != 0 && done == total); }
  };
  struct P2pIn {
    const P2pMsg* m = nullptr;
    std::uint64_t total = 0, done = 0;
    bool finished() const { return m == nullptr || (total != 0 && done == total); }
  };
  void p2p_begin(P2pOut& out, P2pIn& in);
  bool p2p_step(P2pOut& out, P2pIn& in);
  void p2p_check(P2pOut& out, P2pIn& in);
  void p2p_wait(P2pOut& out, P2pIn& in);
  void p2p_end();

  struct Header;
  struct RankCtl;
  struct Ring;
  struct BoxLine;

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
  // arrived(j): whether local rank j has reached the point this rank waits for.
  [[noreturn]] void fail_timeout(const OpDesc& d, const std::function<bool(int)>& arrived);
  void check_abort_and_peers(const OpDesc& d);
  void check_abort(const OpDesc& d);
  void check_peer(const OpDesc& d, int rank, const std::function<bool()>& arrived);
  // Throws DTRAIN_ERR_MISMATCH when a peer is in call d.seq with another fingerprint and ready()
  // (whether what this rank waits for has come after all) is still false.
  void check_peer_calls(const OpDesc& d, const std::function<bool()>& ready);
  void wait_all(const OpDesc& d);
  template <class Ready>
  bool spin(Ready&& ready);
  void adapt_after_sleep(Clock::time_point t0);
  // algorithms (shm_collectives.cpp)
  void allreduce_small(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  void allreduce_pipelined(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  // latency path (shm_box.cpp)
  void allreduce_box(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  BoxLine* box(int rank, std::uint64_t call) const;
  void box_publish(const OpDesc& d, const std::uint8_t* send, std::size_t bytes);
  void box_wait(const OpDesc& d, int rank, const BoxLine& b);
  void box_check_peer(const OpDesc& d, int rank);
  // point-to-point (shm_p2p.cpp)
  Ring* ring(int from, int to) const;
  std::uint8_t* ring_data(const Ring* r) const { return reinterpret_cast<std::uint8_t*>(const_cast<Ring*>(r)) + 128; }
  void ring_bell(int rank);
  void notify(int rank);
  bool p2p_ready(const P2pOut& o, const P2pIn& i) const;
  bool send_step(P2pOut& o);
  bool recv_step(P2pIn& i);
  void check_frame(const P2pIn& i, const std::uint64_t* header) const;
  std::string p2p_call(const P2pOut& o, const P2pIn& i) const;
  std::string peer_state(int rank) const;
  [[noreturn]] void p2p_fail_peer(const P2pOut& o, const P2pIn& i, int peer, const std::string& what);

  std::uint8_t* slot(int set, int rank) const {
    return static_cast<std::uint8_t*>(base_) + layout_.data_offset +
           (static_cast<std::size_t>(set) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(rank)) *
               layout_.buf_bytes;
  }
  int next_set() { return static_cast<int>(round_++ % 3u); }

  int me_ = 0;
  int n_ = 1;
  std::vector<int> granks_;
  std::chrono::milliseconds timeout_;
  int spin_us_ = 50;
  std::string name_;
  void* base_ = nullptr;
  // Where things are in the segment (the same in every local rank's mapping), in bytes.
  struct Layout {
    std::size_t bytes = 0;         // the whole segment
    std::size_t slot_bytes = 0;
    std::size_t buf_bytes = 0;     // one of the three rotating buffers of a rank's data area
    std::size_t boxes_offset = 0;
    std::size_t data_offset = 0;
    std::size_t rings_offset = 0;
    std::size_t ring_bytes = 0;    // data bytes of one ring (a multiple of 4096)
  } layout_;
  int spin_budget_us_ = 0;      // adaptive spin of a wait (spin_us_ .. 20 x spin_us_)
  bool oversubscribed_ = false; // more local ranks than CPUs this process may run on
  Header* hdr_ = nullptr;
  RankCtl* ctl_ = nullptr;
  std::uint32_t epoch_ = 0;     // syncs this rank passed
  std::uint64_t round_ = 0;     // slot-set rounds this rank started
  std::uint64_t calls_ = 0;     // engine calls made (fingerprint slot parity)
  bool first_sync_ = false;     // the next sync is the first of a call: check fingerprints
  std::uint64_t box_calls_ = 0; // latency-path calls made (the flag value of the current one)
  std::vector<const void*> srcs_;      // one source per local rank for the reductions
};

}  // namespace dtrain::coll::shm
