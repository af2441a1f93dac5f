// gather, scatter and alltoallv over an engine's barrier and sendrecv (exchange.hpp).
#include "exchange.hpp"

#include <cstring>

#include <fmt/format.h>

namespace dtrain::coll::exchange {
namespace {

std::uint8_t* at(void* base, std::size_t elems, std::size_t esz) { return static_cast<std::uint8_t*>(base) + elems * esz; }
const std::uint8_t* at(const void* base, std::size_t elems, std::size_t esz) {
  return static_cast<const std::uint8_t*>(base) + elems * esz;
}

}  // namespace

void gather(const Context& c, const OpDesc& d, const void* send, void* recv) {
  const std::size_t esz = dtype_size(d.dtype), count = d.count;
  c.engine.barrier(d);
  if (c.rank != d.root) {
    const P2pMsg m = c.mailbox.coll_msg(d, d.root, true, send, count);
    c.engine.sendrecv(&m, nullptr);
    return;
  }
  std::uint8_t* own = at(recv, static_cast<std::size_t>(c.rank) * count, esz);
  if (own != send && count != 0) std::memmove(own, send, count * esz);
  for (int r = 0; r < c.size; ++r) {
    if (r == c.rank) continue;
    c.mailbox.park_user_messages(c.engine, d, r);
    const P2pMsg m = c.mailbox.coll_msg(d, r, false, at(recv, static_cast<std::size_t>(r) * count, esz), count);
    c.engine.sendrecv(nullptr, &m);
  }
}

void scatter(const Context& c, const OpDesc& d, const void* send, void* recv) {
  const std::size_t esz = dtype_size(d.dtype), count = d.count;
  c.engine.barrier(d);
  if (c.rank != d.root) {
    c.mailbox.park_user_messages(c.engine, d, d.root);
    const P2pMsg m = c.mailbox.coll_msg(d, d.root, false, recv, count);
    c.engine.sendrecv(nullptr, &m);
    return;
  }
  for (int r = 0; r < c.size; ++r) {
    if (r == c.rank) continue;
    const P2pMsg m = c.mailbox.coll_msg(d, r, true, at(send, static_cast<std::size_t>(r) * count, esz), count);
    c.engine.sendrecv(&m, nullptr);
  }
  const std::uint8_t* own = at(send, static_cast<std::size_t>(c.rank) * count, esz);
  if (own != recv && count != 0) std::memmove(recv, own, count * esz);
}

// Step k = 1 .. n-1 sends block (r+k)%n and receives block (r-k)%n together; this rank's own block is
// copied (its two counts must agree, as every pair's).
void alltoallv(const Context& c, const OpDesc& d, const void* send, const std::size_t* scounts,
               const std::size_t* sdispls, void* recv, const std::size_t* rcounts, const std::size_t* rdispls) {
  const std::size_t esz = dtype_size(d.dtype);
  const int n = c.size, r = c.rank;
  const auto me = static_cast<std::size_t>(r);
  c.engine.barrier(d);
  if (scounts[me] != rcounts[me])
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("{}: rank {} sends {} elements to itself but receives {} from itself (its "
                                "sendcounts[{}] and recvcounts[{}] must agree)",
                                d.text(), c.world_rank, scounts[me], rcounts[me], r, r));
  if (scounts[me] != 0) std::memmove(at(recv, rdispls[me], esz), at(send, sdispls[me], esz), scounts[me] * esz);
  for (int k = 1; k < n; ++k) {
    const auto to = static_cast<std::size_t>((r + k) % n), from = static_cast<std::size_t>((r - k + n) % n);
    c.mailbox.park_user_messages(c.engine, d, static_cast<int>(from));
    const P2pMsg out = c.mailbox.coll_msg(d, static_cast<int>(to), true, at(send, sdispls[to], esz), scounts[to]);
    const P2pMsg in = c.mailbox.coll_msg(d, static_cast<int>(from), false, at(recv, rdispls[from], esz), rcounts[from]);
    c.engine.sendrecv(&out, &in);
  }
}

}  // namespace dtrain::coll::exchange
