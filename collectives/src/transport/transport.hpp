#pragma once
// The CPU transport seam: what the communicator (comm.cpp) runs every host-buffer collective on.
// One small abstract class, one folder per backend, one factory from a plain options struct (the
// shape of Gloo's gloo/transport/{tcp,uv,ibverbs} with its Device factory):
//   self/  one rank: copies
//   shm/   every rank of the group on this host: one shared-memory segment (shm_engine.hpp)
//   tcp/   sockets between every pair of ranks: the Mesh ("device" with its pairs, mesh.hpp) and
//          the algorithms written against its one point-to-point primitive (group.hpp)
//   hier/  several hosts with several ranks each: shm within the host, tcp between the hosts'
//          leaders (allreduce, barrier) or between all ranks (broadcast, allgather, reduce_scatter)
// make_transport() picks the backend from where the group's ranks are (see factory.cpp).
//
// Contract of every engine: a call gets the validated OpDesc of the user's call (count, dtype, op,
// root, sequence number, deadline) and the user's buffers, which are either distinct or in NCCL's
// in-place layouts (api.cpp normalises the other in-place forms); it returns with the result in
// recv on this rank or throws CollError carrying the C ABI status. After a throw the communicator
// calls abort(), which must make every peer that waits on this rank fail at once with the root
// cause, and never uses the engine again.
//
// How the next changes plug in (not implemented yet):
// (a) Sub-communicators (dtrain_comm_split). TransportOptions already describes a group, not the
//     world: `members` (world rank of each group rank, in group-rank order), `rank` (this process's
//     group rank), `node` (the group ranks that share this host) and `key_prefix` (the group's own
//     bootstrap keys). Every engine indexes peers by group rank, keys its store records under
//     key_prefix and names world ranks in messages. A split allgathers (color, key, world rank, node)
//     over the parent with the parent's engine, orders each color by (key, parent rank), and calls
//     make_transport() with key_prefix = "<parent prefix>split/<parent seq>/<color>/".
// (b) Tagged blocking send/recv. They join this interface as
//       virtual void send(const P2pDesc& d, int peer, const void* buf) = 0;   // and recv(..., void*)
//     with P2pDesc = {tag, count, dtype, deadline, per-pair sequence}: tcp sends one framed message
//     through Mesh (its WireHeader's reserved word becomes the channel, collective or point-to-point;
//     the tag, count and dtype travel in the fingerprint words, so the receiver reports a size or
//     dtype mismatch as DTRAIN_ERR_MISMATCH, and an early message of another tag waits in a per-peer
//     inbox); shm gets a per-receiver mailbox in its segment, waited on with the same spin-then-futex
//     wait as its syncs (deadline, abort record and peer liveness checked between sleeps); hier
//     routes by host: a peer in `node` through its shm engine, any other through its tcp mesh.
// (c) Single-copy shared-memory allreduce for large buffers. Stays inside shm/: shm::Engine::allreduce
//     already picks its algorithm by size; a third path (its own file) publishes this rank's send
//     and recv addresses in its control block (buffers from dtrain_mem_alloc, a shared pool every
//     local rank maps, or any buffer through process_vm_readv), syncs once, reduces its piece
//     straight from the peers' send buffers and copies the others' reduced pieces straight from
//     their recv buffers. Nothing in this interface or in the communicator changes.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "../engine.hpp"
#include "dtrain/collectives.h"
#include "dtrain/rendezvous/store.hpp"

namespace dtrain::coll {

class Transport {
 public:
  virtual ~Transport() = default;
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

  // Records a failure so that peers waiting on this rank stop at once with the same status.
  virtual void abort(dtrain_status_t status, const std::string& message) noexcept = 0;
};

// What make_transport() needs: the group, where its ranks are, the store, and the tunables.
struct TransportOptions {
  std::vector<int> members;        // world rank of each group rank (messages name these)
  int rank = 0;                    // this process's group rank
  std::vector<int> node;           // group ranks on this host, ascending, rank included
  std::string kind = "auto";       // auto | shm | tcp (DTRAIN_TRANSPORT): tcp uses sockets even within a host
  rdzv::Store* store = nullptr;    // scoped to run id + generation; outlives the transport
  std::string key_prefix;          // the group's bootstrap keys, e.g. "coll/3/"
  std::string shm_name_prefix;     // shared-memory segment name stem, e.g. "dtrain-<run>-g<gen>"
  std::string advertise;           // empty: DTRAIN_SOCKET_ADDR, DTRAIN_LOCAL_ADDR, the store connection
  std::chrono::milliseconds timeout{300000};
  std::size_t shm_slot_bytes = 2 << 20;
  std::size_t tcp_chunk_bytes = 1 << 20;
  int spin_us = 50;
};

// Sets up the engine for the group (bootstrapping through the store, bounded by the timeout):
//   one rank -> self; kind tcp, or alone on its host -> tcp; the whole group on one host -> shm;
//   otherwise -> hierarchical.
// Throws CollError (or the store's dtrain::Error).
std::unique_ptr<Transport> make_transport(const TransportOptions& options);

}  // namespace dtrain::coll
