#pragma once
// MPI_ANY_SOURCE for one tag, over any engine. The next message of every ordered pair is visible
// without taking it (Engine::peek: the shm ring's head frame, the TCP socket's next header or a
// parked frame); the first peer whose next message has the tag is the source, which the
// communicator then receives from as from any peer (checking count and dtype). Peers are polled
// round robin (starting after the last one served, so a busy sender cannot starve the others),
// spinning for ~50 us, then sleeping in slices that grow to 2 ms, until the deadline.
#include <chrono>
#include <cstddef>
#include <vector>

#include "call.hpp"
#include "engine/engine.hpp"
#include "mailbox.hpp"

namespace dtrain::coll {

class AnySource {
 public:
  // world: the world rank of every rank of the communicator; rank: this one.
  AnySource(std::vector<int> world, int rank) : world_(std::move(world)), rank_(rank) {}

  // The rank whose next message to this one carries `tag` first: a message to itself or a parked
  // one first, then the engine's. Throws DTRAIN_ERR_PEER when every other rank has left with none
  // left to take, DTRAIN_ERR_TIMEOUT past the deadline (count and dtype name the receive).
  int find(Engine& engine, const Mailbox& mailbox, int tag, std::size_t count, dtrain_dtype_t dtype,
           std::chrono::milliseconds timeout);

 private:
  std::vector<int> world_;
  int rank_;
  int next_ = 0;  // the peer looked at first
};

}  // namespace dtrain::coll
