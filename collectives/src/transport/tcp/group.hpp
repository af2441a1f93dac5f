#pragma once
// The TCP algorithms, written against Mesh::exchange() and run on a group of the mesh's ranks (every
// rank of a flat communicator, or the hosts' leaders of a hierarchical one):
//   allreduce: recursive doubling (ranks beyond the largest power of two fold in first) up to 64 KiB,
//              else a ring reduce-scatter + allgather in chunks;
//   broadcast: a fingerprint check (data only flows out of the root), then a binomial tree up to
//              64 KiB, else a pipelined chain;
//   allgather / reduce_scatter: ring; barrier: recursive doubling of empty messages.
// Buffers are reduced in place and never float16/bfloat16 (callers widen those; see staging.hpp).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mesh.hpp"

namespace dtrain::coll::tcp {

class Group {
 public:
  // ranks: mesh ranks, ascending, including mesh.rank().
  Group(Mesh& mesh, std::vector<int> ranks);

  int size() const { return static_cast<int>(ranks_.size()); }

  void barrier(const OpDesc& d);
  // count elements of dtype in buf; avg_divisor > 1 divides the result.
  void allreduce(const OpDesc& d, void* buf, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                 int avg_divisor);
  // bytes from the group's rank root_index (an index into ranks).
  void broadcast(const OpDesc& d, void* buf, std::size_t bytes, int root_index);
  // buf holds size() blocks of block_bytes; this rank's block is already in place.
  void allgather(const OpDesc& d, void* buf, std::size_t block_bytes);
  // buf (size() blocks of block_count, scratch: modified) -> out (this rank's block, reduced).
  void reduce_scatter(const OpDesc& d, void* buf, void* out, std::size_t block_count, dtrain_dtype_t dtype,
                      dtrain_op_t op, int avg_divisor);

 private:
  void recursive_doubling(const OpDesc& d, std::uint8_t* buf, std::size_t count, dtrain_dtype_t dtype,
                          dtrain_op_t op, int avg_divisor);
  void ring_reduce_scatter(const OpDesc& d, std::uint8_t* buf, const std::vector<std::size_t>& starts,
                           std::size_t esz, dtrain_dtype_t dtype, dtrain_op_t op, int avg_divisor);
  void ring_allgather(const OpDesc& d, std::uint8_t* buf, const std::vector<std::size_t>& starts, std::size_t esz);
  int at(int index) const { return ranks_[static_cast<std::size_t>(index)]; }
  std::uint8_t* scratch(std::size_t bytes);

  Mesh& mesh_;
  std::vector<int> ranks_;
  int idx_ = 0;  // this rank's index in ranks_
  std::vector<std::uint8_t> scratch_;
};

}  // namespace dtrain::coll::tcp
