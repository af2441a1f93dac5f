#include "in_place.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "call.hpp"

namespace dtrain::coll {

bool overlap(const void* a, std::size_t an, const void* b, std::size_t bn) {
  if (a == nullptr || b == nullptr || an == 0 || bn == 0) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bn && y < x + an;
}

std::size_t elem_size(dtrain_dtype_t dtype) { return valid_dtype(static_cast<int>(dtype)) ? dtype_size(dtype) : 0; }

void check_same_or_apart(const char* what, const void* send, const void* recv, std::size_t count,
                         dtrain_dtype_t dtype) {
  const std::size_t bytes = count * elem_size(dtype);
  if (send != recv && overlap(send, bytes, recv, bytes))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("{}: sendbuf and recvbuf overlap without being the same pointer; pass the same "
                                "pointer for in place, or separate buffers",
                                what));
}

bool allgather_alias(const void* send, const void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int rank,
                     int size) {
  if (send == nullptr || recv == nullptr) return false;  // the engine names the NULL buffer
  const std::size_t bytes = sendcount * elem_size(dtype);
  const auto* own = static_cast<const std::uint8_t*>(recv) + bytes * static_cast<std::size_t>(rank);
  if (send == own || !overlap(send, bytes, recv, bytes * static_cast<std::size_t>(size))) return false;
  if (send == recv) return true;
  throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                  fmt::format("allgather: sendbuf overlaps recvbuf but is neither recvbuf + rank*sendcount "
                              "(rank {}, the in-place layout) nor recvbuf; pass one of those or separate buffers",
                              rank));
}

bool reduce_scatter_alias(const void* send, const void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int rank,
                          int size) {
  if (send == nullptr || recv == nullptr) return false;  // the engine names the NULL buffer
  const std::size_t bytes = recvcount * elem_size(dtype);
  const auto* own = static_cast<const std::uint8_t*>(send) + bytes * static_cast<std::size_t>(rank);
  if (recv == own || !overlap(recv, bytes, send, bytes * static_cast<std::size_t>(size))) return false;
  if (send == recv) return true;
  throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                  fmt::format("reduce_scatter: recvbuf overlaps sendbuf but is neither sendbuf + rank*recvcount "
                              "(rank {}, the in-place layout) nor sendbuf; pass one of those or separate buffers",
                              rank));
}

void check_block_alias(const char* what, const void* part, const void* whole, std::size_t count, dtrain_dtype_t dtype,
                       int rank, int size, const char* layout) {
  const std::size_t bytes = count * elem_size(dtype);
  const auto* own = static_cast<const std::uint8_t*>(whole) + bytes * static_cast<std::size_t>(rank);
  if (part == own || !overlap(part, bytes, whole, bytes * static_cast<std::size_t>(size))) return;
  throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                  fmt::format("{}: the buffers overlap but not in the in-place layout ({}, rank {}); pass that or "
                              "separate buffers",
                              what, layout, rank));
}

}  // namespace dtrain::coll
