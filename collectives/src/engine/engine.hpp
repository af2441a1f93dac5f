#pragma once
// The CPU engines: what the communicator (comm.cpp) runs every host-buffer call on. One abstract
// class, one folder per engine, one factory (factory.cpp), in the shape of Gloo's transports:
//   self/  one rank: copies
//   shm/   every rank of the group on this host: one shared-memory segment (shm_engine.hpp)
//   tcp/   sockets between every pair of ranks (the Mesh, mesh.hpp) and the algorithms written
//          against its one point-to-point primitive (group.hpp)
//   hier/  several hosts with several ranks each: shm within the host, tcp across (hier_engine.hpp)
//
// Contract: a call gets the validated OpDesc (count, dtype, op, root, sequence number, deadline) and
// the user's buffers, distinct or in NCCL's in-place layouts (api.cpp normalises the other forms);
// it returns with the result in recv or throws CollError carrying the C ABI status. After a throw the
// communicator calls abort(), which makes every peer waiting on this rank fail at once with the
// root cause, and never uses the engine again.
//
// Groups (comm_split.cpp): EngineOptions describes a group, not the world. Every engine indexes
// peers by group rank, keys its store records under key_prefix and names world ranks in messages.
//
// Point-to-point (comm_p2p.cpp): the messages of an ordered pair of ranks form one in-order stream;
// each starts with its P2pDesc fingerprint, which the receiver compares with its own before it takes
// a byte (DTRAIN_ERR_MISMATCH naming both sides). Messages to the caller itself never reach here.
//
// No engine touches another rank's buffers: data moves through memory the engine owns (the shm
// segment, sockets), so a peer that dies mid-call costs a failed call, never an access to freed memory.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../call.hpp"
#include "dtrain/collectives.h"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll {

class Engine {
 public:
  virtual ~Engine() = default;
  // "self", "shm", "tcp" or "hierarchical".
  virtual const char* name() const noexcept = 0;

  virtual void barrier(const OpDesc& d) = 0;
  virtual void allreduce(const OpDesc& d, const void* send, void* recv) = 0;
  // From group rank d.root; send is read on the root only.
  virtual void broadcast(const OpDesc& d, const void* send, void* recv) = 0;
  // d.count elements from every rank into recv, in rank order.
  virtual void allgather(const OpDesc& d, const void* send, void* recv) = 0;
  // send holds size x d.count elements; recv gets this rank's block, reduced.
  virtual void reduce_scatter(const OpDesc& d, const void* send, void* recv) = 0;
  // Sends `out` and receives `in` at the same time (either may be null; peers are never this rank),
  // both by their deadline: progress in both directions, so two ranks that send to each other in one
  // sendrecv never wait on each other. A send is done once the whole message is in the engine's
  // buffer towards the peer (the shm ring, the kernel's socket buffer), not when the peer has it.
  virtual void sendrecv(const P2pMsg* out, const P2pMsg* in) = 0;
  // The fingerprint (P2pDesc fp0, fp1) of the next point-to-point message from `peer` (never this
  // rank) when its header has arrived, without taking it: kMessage; kNone when none has yet; kGone
  // when none has and the peer has left (closed its connection, died). Never blocks: the
  // communicator's receive from any rank (dtrain_recv_any) polls the peers with it, then receives
  // from the first whose message matches through sendrecv(). Throws CollError when the group aborted.
  enum Peek { kNone = 0, kMessage = 1, kGone = 2 };
  virtual Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) = 0;

  // Records a failure so that peers waiting on this rank stop at once with the same status.
  virtual void abort(dtrain_status_t status, const std::string& message) noexcept = 0;
};

// What make_engine() needs: the group, where its ranks are, the store, and the tunables.
struct EngineOptions {
  std::vector<int> members;        // world rank of each group rank (messages name these)
  int rank = 0;                    // this process's group rank
  std::vector<int> node;           // group ranks on this host, ascending, rank included
  // Host of every group rank (equal values: one host), known for a split; empty for the world, whose
  // hosts are all assumed to hold node.size() ranks.
  std::vector<std::int64_t> host_of;
  std::string kind = "auto";       // auto | shm | tcp (DTRAIN_TRANSPORT): tcp uses sockets even within a host
  rdzv::Store* store = nullptr;    // scoped to run id + generation; outlives the engine
  std::string key_prefix;          // the group's bootstrap keys, e.g. "coll/3/"
  std::string shm_name_prefix;     // shared-memory segment name stem, e.g. "dtrain-<run>-g<gen>"
  std::string advertise;           // empty: DTRAIN_SOCKET_ADDR, DTRAIN_LOCAL_ADDR, the store connection
  std::chrono::milliseconds timeout{300000};
  std::size_t shm_slot_bytes = 2 << 20;
  std::size_t shm_p2p_bytes = 2 << 20;  // a rank's point-to-point receive rings, over all its peers
  std::size_t tcp_chunk_bytes = 1 << 20;
  int spin_us = 50;
};

// Sets up the engine for the group (bootstrapping through the store, bounded by the timeout):
//   one rank -> self; kind tcp, or one rank on every host -> tcp; the whole group on one host -> shm;
//   otherwise -> hierarchical (with host_of known, every rank of the group decides the same way).
// Throws CollError (or the store's dtrain::Error).
std::unique_ptr<Engine> make_engine(const EngineOptions& options);

}  // namespace dtrain::coll
