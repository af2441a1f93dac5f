#pragma once
// The C ABI's rules for buffers that overlap: each call accepts NCCL's in-place layout (and, where
// the header says so, send == recv); any other overlap is DTRAIN_ERR_INVALID_ARGUMENT, thrown as a
// CollError naming the call and the layouts it takes.
#include <cstddef>

#include "dtrain/collectives.h"

namespace dtrain::coll {

// Byte ranges [a, a+an) and [b, b+bn) share a byte (NULL or empty ranges never do).
bool overlap(const void* a, std::size_t an, const void* b, std::size_t bn);

// dtype_size(), or 0 for an invalid dtype (the engine reports that with the operation's name).
std::size_t elem_size(dtrain_dtype_t dtype);

// `what` (allreduce, reduce): send and recv of count elements are the same pointer or apart.
void check_same_or_apart(const char* what, const void* send, const void* recv, std::size_t count,
                         dtrain_dtype_t dtype);

// allgather: true for send == recv (the extension), false for NCCL's layout (send == recv +
// rank*sendcount) or separate buffers; throws for any other overlap.
bool allgather_alias(const void* send, const void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int rank,
                     int size);

// reduce_scatter: true for recv == send (the extension), false for NCCL's layout (recv == send +
// rank*recvcount) or separate buffers; throws for any other overlap.
bool reduce_scatter_alias(const void* send, const void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int rank,
                          int size);

// One block of `whole` (size x count elements) against `part` (count elements): either disjoint or
// `part` is exactly block `rank`; `layout` names that form in the message.
void check_block_alias(const char* what, const void* part, const void* whole, std::size_t count, dtrain_dtype_t dtype,
                       int rank, int size, const char* layout);

}  // namespace dtrain::coll
