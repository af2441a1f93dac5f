#pragma once
// gather, scatter, alltoall and alltoallv, written once over any engine's barrier (which compares
// every rank's fingerprint of the call, so ranks that call different ops, counts or roots get
// DTRAIN_ERR_MISMATCH naming both) and its point-to-point sendrecv (whose messages carry a reserved
// negative tag naming the op and root, coll_tag(), and are checked by the receiver against its own
// description, so uneven alltoallv splits that disagree are a mismatch too). Those messages share
// each pair's stream with the user's (mailbox.hpp): before a receive, the user's messages at the
// head of the stream are parked for the user's later receives.
//   gather     linear: every rank sends its block to the root, which receives them in rank order
//   scatter    linear: the root sends block r to rank r, in rank order
//   alltoallv  pairwise exchange: step k sends to (r+k)%n and receives from (r-k)%n at once
// Counts and displacements are in elements; the caller has checked the arguments.
#include <cstddef>

#include "call.hpp"
#include "engine/engine.hpp"
#include "mailbox.hpp"

namespace dtrain::coll::exchange {

// The engine and the streams of one communicator, this rank's place in it.
struct Context {
  Engine& engine;
  Mailbox& mailbox;
  int rank;
  int size;
  int world_rank;  // for messages
};

// d.count elements of every rank's send into the root's recv (size blocks, rank order).
void gather(const Context& c, const OpDesc& d, const void* send, void* recv);
// The root's send (size blocks of d.count) cut in rank order, block r into rank r's recv.
void scatter(const Context& c, const OpDesc& d, const void* send, void* recv);
// scounts[r] elements at send + sdispls[r] to rank r; rcounts[r] from rank r at recv + rdispls[r].
void alltoallv(const Context& c, const OpDesc& d, const void* send, const std::size_t* scounts,
               const std::size_t* sdispls, void* recv, const std::size_t* rcounts, const std::size_t* rdispls);

}  // namespace dtrain::coll::exchange
