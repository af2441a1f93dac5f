#pragma once
// The TCP algorithms, written against Channel::exchange() and Channel::stream() and run on a group of
// the channel's ranks (every rank of a flat communicator, or the hosts' leaders of a hierarchical one):
//   allreduce: recursive doubling (ranks beyond the largest power of two fold in first) up to 64 KiB,
//              else a ring reduce-scatter + allgather in chunks, every step pipelined in one stream
//              (a chunk goes on as soon as it has arrived and been folded), reading send and
//              writing recv only (no copy for out of place);
//   broadcast: a fingerprint check (data only flows out of the root), then a binomial tree up to
//              64 KiB, else a pipelined chain;
//   allgather / reduce_scatter: ring; barrier: recursive doubling of empty messages.
// Never float16/bfloat16 (callers widen those; see staging.hpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "channel.hpp"

namespace dtrain::coll::tcp {

class Group {
 public:
  // ranks: the channel's ranks, ascending, including channel.rank().
  Group(Channel& channel, std::vector<int> ranks);

  int size() const { return static_cast<int>(ranks_.size()); }

  void barrier(const OpDesc& d);
  // count elements of dtype from send into recv (send == recv: in place); avg_divisor > 1 divides the
  // result. The ring reads send and writes recv only, so out of place costs no copy.
  void allreduce(const OpDesc& d, const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype,
                 dtrain_op_t op, int avg_divisor);
  // bytes from the group's rank root_index (an index into ranks).
  void broadcast(const OpDesc& d, void* buf, std::size_t bytes, int root_index);
  // buf holds size() blocks of block_bytes; this rank's block is already in place.
  void allgather(const OpDesc& d, void* buf, std::size_t block_bytes);
  // send (size() blocks of block_count) -> out (this rank's block, reduced); work: scratch of
  // size() blocks (may be send itself, which is then modified).
  void reduce_scatter(const OpDesc& d, const void* send, void* work, void* out, std::size_t block_count,
                      dtrain_dtype_t dtype, dtrain_op_t op, int avg_divisor);

 private:
  void recursive_doubling(const OpDesc& d, std::uint8_t* buf, std::size_t count, dtrain_dtype_t dtype,
                          dtrain_op_t op, int avg_divisor);
  // A ring's reduction of a chunk: out = in op own (count elements), divided by the average's
  // divisor when `last` (the final reduce-scatter step).
  using Fold = std::function<void(const void* in, const void* own, void* out, std::size_t count, bool last)>;
  static Fold folder(dtrain_dtype_t dtype, dtrain_op_t op, int avg_divisor);
  // rs reduce-scatter steps (blocks of send folded into buf) then ag allgather steps (blocks of buf
  // passed on), pipelined in one Channel::stream.
  void ring(const OpDesc& d, const std::uint8_t* send, std::uint8_t* buf, const std::vector<std::size_t>& starts,
            std::size_t esz, const Fold& fold, int rs, int ag);
  int at(int index) const { return ranks_[static_cast<std::size_t>(index)]; }
  std::uint8_t* scratch(std::size_t bytes);

  Channel& channel_;
  std::vector<int> ranks_;
  int idx_ = 0;  // this rank's index in ranks_
  std::vector<std::uint8_t> scratch_;
};

}  // namespace dtrain::coll::tcp
