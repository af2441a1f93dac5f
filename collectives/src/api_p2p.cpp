// The C ABI of point-to-point: dtrain_send, dtrain_recv and dtrain_sendrecv are one call with one or
// two directions, through dispatch() (handle.hpp). Host buffers go to the CPU communicator. Device
// buffers: the NCCL communicator is created (or its earlier failure reported) before anything is
// sent; the two ends' descriptions are matched through the CPU communicator (a header-only message,
// so mismatches, deadlines and dead peers are reported as for host buffers), then ncclSend/ncclRecv
// run in one ncclGroupStart/End. dtrain_recv_any takes host buffers only.
#include <cstdint>

#include <fmt/format.h>

#include "handle.hpp"
#include "in_place.hpp"

namespace dtrain::coll {
namespace {

struct Direction {
  const void* buf;
  std::size_t count;
  dtrain_dtype_t dtype;
  int peer;
  int tag;
};

// The two buffers of a sendrecv share a byte (MPI forbids it too: the send would read what the
// receive overwrites).
bool overlap(const Direction& s, const Direction& r) {
  return coll::overlap(s.buf, s.count * elem_size(s.dtype), r.buf, r.count * elem_size(r.dtype));
}

dtrain_status_t sendrecv(dtrain_comm_t comm, const Direction& s, const Direction& r, void* stream) {
  Communicator& cpu = cpu_of(comm);
  const bool sending = s.peer != DTRAIN_PROC_NULL, receiving = r.peer != DTRAIN_PROC_NULL;
  if (!sending && !receiving) return DTRAIN_SUCCESS;
  if (sending && receiving && overlap(s, r))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    "sendrecv: sendbuf and recvbuf overlap; pass separate buffers (the receive would overwrite what "
                    "is being sent)");
  const void* sbuf = sending ? s.buf : nullptr;
  const void* rbuf = receiving ? r.buf : nullptr;
  P2pArgs out{sbuf, nullptr, s.count, s.dtype, s.peer, s.tag, false};
  P2pArgs in{nullptr, const_cast<void*>(rbuf), r.count, r.dtype, r.peer, r.tag, false};
  // Refused before anything else, a device call's NCCL communicator included.
  if (sending) cpu.check_p2p(out, "send");
  if (receiving) cpu.check_p2p(in, "recv");
  return dispatch(
      comm, {sbuf, rbuf}, [&](Communicator& c) { c.sendrecv(sending ? &out : nullptr, receiving ? &in : nullptr); },
      [&](nccl::Comm& n, Communicator& c) {
        out.device = in.device = true;
        c.sendrecv(sending ? &out : nullptr, receiving ? &in : nullptr);
        n.sendrecv(sbuf, s.count, s.dtype, sending ? s.peer : -1, const_cast<void*>(rbuf), r.count, r.dtype,
                   receiving ? r.peer : -1, stream);
      });
}

constexpr Direction kNone{nullptr, 0, DTRAIN_UINT8, DTRAIN_PROC_NULL, 0};

}  // namespace
}  // namespace dtrain::coll

using namespace dtrain::coll;

extern "C" {

dtrain_status_t dtrain_send(dtrain_comm_t comm, const void* buf, size_t count, dtrain_dtype_t dtype, int peer, int tag,
                            void* stream) {
  return guard([&] { return sendrecv(comm, Direction{buf, count, dtype, peer, tag}, kNone, stream); });
}

dtrain_status_t dtrain_recv(dtrain_comm_t comm, void* buf, size_t count, dtrain_dtype_t dtype, int peer, int tag,
                            void* stream) {
  return guard([&] { return sendrecv(comm, kNone, Direction{buf, count, dtype, peer, tag}, stream); });
}

dtrain_status_t dtrain_sendrecv(dtrain_comm_t comm, const void* sendbuf, size_t sendcount, dtrain_dtype_t senddtype,
                                int dest, int sendtag, void* recvbuf, size_t recvcount, dtrain_dtype_t recvdtype,
                                int source, int recvtag, void* stream) {
  return guard([&] {
    return sendrecv(comm, Direction{sendbuf, sendcount, senddtype, dest, sendtag},
                    Direction{recvbuf, recvcount, recvdtype, source, recvtag}, stream);
  });
}

dtrain_status_t dtrain_recv_any(dtrain_comm_t comm, void* buf, size_t count, dtrain_dtype_t dtype, int tag,
                                int* source, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    if (source == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "recv_any: source (the output pointer) is NULL");
    if (stream != nullptr || on_device(buf, nullptr))
      throw CollError(DTRAIN_ERR_UNSUPPORTED, "recv_any: device buffers are not supported (host buffers only); "
                                              "receive from a known peer with dtrain_recv");
    *source = c.recv_any(buf, count, dtype, tag);
    return DTRAIN_SUCCESS;
  });
}

}  // extern "C"
