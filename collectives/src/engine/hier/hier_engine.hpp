#pragma once
// Hierarchical engine, for groups that span several hosts with several ranks on some of them. It
// composes the two other engines: a shm engine over the ranks of this host (none when this rank is
// alone on its host) and a tcp engine over every rank of the group (one socket per pair), plus a tcp
// group of the hosts' leaders (the first rank of each host) on its channel.
//   allreduce: reduce within the host over shared memory, allreduce across hosts among the leaders,
//              broadcast back within the host (float16/bfloat16 accumulate in float32 throughout);
//   barrier:   shm barrier, leaders' barrier, shm barrier;
//   broadcast, allgather, reduce_scatter: the tcp engine's rings over every rank;
//   point-to-point: a peer on this host through the shm rings, any other through its socket; a
//              sendrecv with one peer of each kind progresses both directions together.
// One outcome per call on every rank: each engine gives it for its part (barrier.hpp, failures.hpp;
// the leaders confirm their part), and a rank that fails one part never arrives at the next, so
// the ranks waiting there fail with its recorded cause.
#include <memory>
#include <vector>

#include "../shm/shm_engine.hpp"
#include "../tcp/tcp_engine.hpp"

namespace dtrain::coll::hier {

struct Options {
  shm::Options host;     // this host's ranks (unused when node has one rank)
  std::vector<int> node; // the group ranks on this host, ascending (host.segment.local_rank indexes it)
  tcp::Options all;      // every rank of the group
};

class Engine final : public coll::Engine {
 public:
  // Sets up shared memory, then the sockets, then learns the leaders through the store
  // (<all.key_prefix>lr/<rank>: each rank's index on its host). Throws CollError.
  explicit Engine(const Options& options);

  const char* name() const noexcept override { return "hierarchical"; }
  void barrier(const OpDesc& d) override;
  void allreduce(const OpDesc& d, const void* send, void* recv) override;
  void broadcast(const OpDesc& d, const void* send, void* recv) override { all_.broadcast(d, send, recv); }
  void allgather(const OpDesc& d, const void* send, void* recv) override { all_.allgather(d, send, recv); }
  void reduce_scatter(const OpDesc& d, const void* send, void* recv) override {
    all_.reduce_scatter(d, send, recv);
  }
  void sendrecv(const P2pMsg* out, const P2pMsg* in) override;
  Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) override;
  void abort(dtrain_status_t status, const std::string& msg) noexcept override;

 private:
  bool leader() const { return !host_ || host_->local_rank() == 0; }
  // The peer's index among this host's ranks, -1 when it is on another host.
  int local_index(int group_rank) const;
  void mixed(const P2pMsg* local, bool local_sends, const P2pMsg* remote);

  int size_;
  std::vector<int> node_;
  std::unique_ptr<shm::Engine> host_;  // null when this rank is alone on its host
  tcp::Engine all_;
  std::unique_ptr<tcp::Group> leaders_;  // on the leaders only
};

}  // namespace dtrain::coll::hier
