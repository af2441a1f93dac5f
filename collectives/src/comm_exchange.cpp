// Communicator::reduce, gather, scatter, alltoall and alltoallv: written once over the engine's
// barrier (which compares every rank's fingerprint of the call, so ranks that call different ops,
// counts or roots get DTRAIN_ERR_MISMATCH naming both) and its point-to-point sendrecv (whose
// messages carry a reserved negative tag naming the op and root, coll_tag(), and are checked by the
// receiver against its own description, so uneven alltoallv splits that disagree are a mismatch too).
// Those messages share each pair's ordered stream with the user's point-to-point messages: before a
// receive, the user's messages at the head of the stream are parked (park_user_messages) for the
// user's later receives, so a message sent before a collective may still be received after it.
//   reduce     the engine's allreduce with the reduce's fingerprint, into recv on the root and a
//              scratch buffer elsewhere (premultiplied sums scale first, as allreduce does)
//   gather     linear: every rank sends its block to the root, which receives them in rank order
//   scatter    linear: the root sends block r to rank r, in rank order
//   alltoall   pairwise exchange: step k sends to (r+k)%n and receives from (r-k)%n at once
// Every call runs under run() (progress page, failure handling) and the call's deadline.
#include <cstring>

#include <fmt/format.h>

#include "comm.hpp"

namespace dtrain::coll {
namespace {

void need(const void* p, bool needed, const char* what, OpKind kind, std::size_t count) {
  if (p == nullptr && needed)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("{}: {} is NULL with a count of {}", op_kind_name(kind), what, count));
}

std::uint8_t* at(void* base, std::size_t elems, std::size_t esz) { return static_cast<std::uint8_t*>(base) + elems * esz; }
const std::uint8_t* at(const void* base, std::size_t elems, std::size_t esz) {
  return static_cast<const std::uint8_t*>(base) + elems * esz;
}

}  // namespace

int coll_tag(OpKind kind, int root) { return -1 - (static_cast<int>(kind) + 256 * root); }

void Communicator::park_user_messages(const OpDesc& d, int peer) {
  for (;;) {
    std::uint64_t fp0 = 0, fp1 = 0;
    if (engine_->peek(peer, fp0, fp1) != Engine::kMessage) return;
    const auto tag = static_cast<int>(static_cast<std::uint32_t>(fp1 >> 32));
    if (tag < 0) return;  // a collective's message: the one this call receives next
    P2pMsg m;
    m.peer = peer;
    m.d.seq = ++received_[static_cast<std::size_t>(peer)];
    m.d.tag = tag;
    m.d.count = fp0;
    m.d.dtype = static_cast<dtrain_dtype_t>(fp1 & 0xff);
    m.d.device = ((fp1 >> 8) & 0xff) != 0;
    m.d.deadline = d.deadline;
    m.d.timeout = d.timeout();
    Queued q{m.d, std::vector<std::uint8_t>(m.d.bytes())};
    m.dst = q.bytes.data();
    engine_->sendrecv(nullptr, &m);
    parked_[static_cast<std::size_t>(peer)].push_back(std::move(q));
  }
}

P2pMsg Communicator::coll_msg(const OpDesc& d, int peer, bool sending, const void* buf, std::size_t count) {
  P2pMsg m;
  m.peer = peer;
  if (sending) m.src = buf;
  else m.dst = const_cast<void*>(buf);
  m.d.seq = ++(sending ? sent_ : received_)[static_cast<std::size_t>(peer)];
  m.d.tag = coll_tag(d.kind, d.root);
  m.d.count = count;
  m.d.dtype = d.dtype;
  m.d.deadline = d.deadline;
  m.d.timeout = d.timeout();
  return m;
}

void Communicator::reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                          int root) {
  OpDesc d = next(OpKind::reduce, count, dtype, op, root);
  need(send, count != 0, "sendbuf", d.kind, count);
  if (rank_ == root) need(recv, count != 0, "recvbuf (at the root)", d.kind, count);
  void* out = recv;
  if (rank_ != root) {  // the result is dropped here
    scratch_.resize(count * dtype_size(dtype));
    out = scratch_.data();
  }
  if (d.premul) {
    premultiply(d, send, out, count, op);
    send = out;
  }
  run(&d, [&] { engine_->allreduce(d, send, out); });
}

void Communicator::gather(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::gather, count, dtype, DTRAIN_SUM, root);
  need(send, count != 0, "sendbuf", d.kind, count);
  if (rank_ == root) need(recv, count != 0, "recvbuf (at the root)", d.kind, count);
  const std::size_t esz = dtype_size(dtype);
  run(&d, [&] {
    engine_->barrier(d);
    if (rank_ != root) {
      const P2pMsg m = coll_msg(d, root, true, send, count);
      engine_->sendrecv(&m, nullptr);
      return;
    }
    std::uint8_t* own = at(recv, static_cast<std::size_t>(rank_) * count, esz);
    if (own != send && count != 0) std::memmove(own, send, count * esz);
    for (int r = 0; r < size(); ++r) {
      if (r == rank_) continue;
      park_user_messages(d, r);
      const P2pMsg m = coll_msg(d, r, false, at(recv, static_cast<std::size_t>(r) * count, esz), count);
      engine_->sendrecv(nullptr, &m);
    }
  });
}

void Communicator::scatter(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::scatter, count, dtype, DTRAIN_SUM, root);
  if (rank_ == root) need(send, count != 0, "sendbuf (at the root)", d.kind, count);
  need(recv, count != 0, "recvbuf", d.kind, count);
  const std::size_t esz = dtype_size(dtype);
  run(&d, [&] {
    engine_->barrier(d);
    if (rank_ != root) {
      park_user_messages(d, root);
      const P2pMsg m = coll_msg(d, root, false, recv, count);
      engine_->sendrecv(nullptr, &m);
      return;
    }
    for (int r = 0; r < size(); ++r) {
      if (r == rank_) continue;
      const P2pMsg m = coll_msg(d, r, true, at(send, static_cast<std::size_t>(r) * count, esz), count);
      engine_->sendrecv(&m, nullptr);
    }
    const std::uint8_t* own = at(send, static_cast<std::size_t>(rank_) * count, esz);
    if (own != recv && count != 0) std::memmove(recv, own, count * esz);
  });
}

void Communicator::alltoall(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype) {
  OpDesc d = next(OpKind::alltoall, count, dtype, DTRAIN_SUM, 0);
  const std::size_t all = count * static_cast<std::size_t>(size());
  need(send, all != 0, "sendbuf", d.kind, all);
  need(recv, all != 0, "recvbuf", d.kind, all);
  const std::size_t esz = dtype_size(dtype);
  std::vector<std::size_t> counts(static_cast<std::size_t>(size()), count), displs(counts.size());
  for (std::size_t r = 0; r < displs.size(); ++r) displs[r] = r * count;
  run(&d, [&] {
    engine_->barrier(d);
    pairwise(d, send, counts.data(), displs.data(), recv, counts.data(), displs.data(), esz);
  });
}

void Communicator::alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                             const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype) {
  const char* arrays[] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
  const std::size_t* given[] = {sendcounts, sdispls, recvcounts, rdispls};
  for (int i = 0; i < 4; ++i)
    if (given[i] == nullptr)
      throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("alltoallv: {} is NULL (one entry per rank)", arrays[i]));
  std::size_t sent = 0, received = 0;
  for (int r = 0; r < size(); ++r) {
    sent += sendcounts[r];
    received += recvcounts[r];
  }
  // The fingerprint's count is 0 (ranks send different totals); the pairs' messages carry the counts.
  OpDesc d = next(OpKind::alltoallv, 0, dtype, DTRAIN_SUM, 0);
  need(send, sent != 0, "sendbuf", d.kind, sent);
  need(recv, received != 0, "recvbuf", d.kind, received);
  run(&d, [&] {
    engine_->barrier(d);
    pairwise(d, send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype_size(dtype));
  });
}

// Step k = 1 .. n-1 sends block (r+k)%n and receives block (r-k)%n together; this rank's own block is
// copied (its two counts must agree, as every pair's).
void Communicator::pairwise(const OpDesc& d, const void* send, const std::size_t* scounts, const std::size_t* sdispls,
                            void* recv, const std::size_t* rcounts, const std::size_t* rdispls, std::size_t esz) {
  const int n = size(), r = rank_;
  const auto me = static_cast<std::size_t>(r);
  if (scounts[me] != rcounts[me])
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("{}: rank {} sends {} elements to itself but receives {} from itself (its "
                                "sendcounts[{}] and recvcounts[{}] must agree)",
                                d.text(), world_rank(r), scounts[me], rcounts[me], r, r));
  if (scounts[me] != 0) std::memmove(at(recv, rdispls[me], esz), at(send, sdispls[me], esz), scounts[me] * esz);
  for (int k = 1; k < n; ++k) {
    const auto to = static_cast<std::size_t>((r + k) % n), from = static_cast<std::size_t>((r - k + n) % n);
    park_user_messages(d, static_cast<int>(from));
    const P2pMsg out = coll_msg(d, static_cast<int>(to), true, at(send, sdispls[to], esz), scounts[to]);
    const P2pMsg in = coll_msg(d, static_cast<int>(from), false, at(recv, rdispls[from], esz), rcounts[from]);
    engine_->sendrecv(&out, &in);
  }
}

}  // namespace dtrain::coll
