// ProcessGroupDtrain's point-to-point ops (send, recv, recv from any source) and barrier.
#include "process_group.hpp"

namespace dtrain_torch {

namespace {

void check_peer(int peer, int size, int self, const char* op) {
  TORCH_CHECK(peer >= 0 && peer < size, "dtrain backend: ", op, " peer rank ", peer, " is not in 0 .. ", size - 1);
  TORCH_CHECK(peer != self, "dtrain backend: ", op, " to or from itself (rank ", self, ")");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  static const char* const op = "send";
  check_single(tensors, op);
  check_peer(dst, size_, rank_, op);
  at::Tensor t = tensors[0];
  return enqueue(
      {c10d::OpType::SEND, op, tensors, tensors, c10d::kUnsetTimeout},
      [this, t, dst, tag](DtrainWork& w) {
        const at::Tensor src = t.contiguous();
        const Span sp = span_of(src, false, op);
        check(dtrain_send(comm_, sp.ptr, sp.count, sp.dtype, dst, tag, w.stream()), op);
      },
      DtrainWork::PointToPoint{true, t, dst, tag});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  static const char* const op = "recv";
  check_single(tensors, op);
  check_peer(src, size_, rank_, op);
  at::Tensor t = tensors[0];
  return enqueue(
      {c10d::OpType::RECV, op, tensors, tensors, c10d::kUnsetTimeout},
      [this, t, src, tag](DtrainWork& w) {
        Staged s(t);
        const Span sp = span_of(s.buf, false, op);
        check(dtrain_recv(comm_, sp.ptr, sp.count, sp.dtype, src, tag, w.stream()), op);
        s.copy_back();
        w.set_source_rank(src);
      },
      DtrainWork::PointToPoint{false, t, src, tag});
}

void ProcessGroupDtrain::run_pair(DtrainWork& send, DtrainWork& recv) {
  const DtrainWork::PointToPoint& s = *send.p2p();
  const DtrainWork::PointToPoint& r = *recv.p2p();
  const at::Tensor src = s.tensor.contiguous();
  Staged dst(r.tensor);
  const Span a = span_of(src, false, "send");
  const Span b = span_of(dst.buf, false, "recv");
  check(dtrain_sendrecv(comm_, a.ptr, a.count, a.dtype, s.peer, s.tag, b.ptr, b.count, b.dtype, r.peer, r.tag,
                        send.stream()),
        "send and recv (run together)");
  dst.copy_back();
  recv.set_source_rank(r.peer);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  static const char* const op = "recv (any source)";
  check_single(tensors, op);
  TORCH_CHECK(tensors[0].device().is_cpu(), "dtrain backend: ", op, " takes a CPU tensor (got one on ",
              tensors[0].device(), "); receive a CUDA tensor from a named source");
  at::Tensor t = tensors[0];
  return enqueue({c10d::OpType::RECVANYSOURCE, op, tensors, tensors, c10d::kUnsetTimeout},
                 [this, t, tag](DtrainWork& w) {
    Staged s(t);
    const Span sp = span_of(s.buf, false, op);
    int source = -1;
    check(dtrain_recv_any(comm_, sp.ptr, sp.count, sp.dtype, tag, &source, nullptr), op);
    s.copy_back();
    w.set_source_rank(source);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::barrier(const c10d::BarrierOptions& opts) {
  static const char* const op = "barrier";
  return enqueue({c10d::OpType::BARRIER, op, {}, {}, opts.timeout},
                 [this](DtrainWork&) { check(dtrain_barrier(comm_), op); });
}

}  // namespace dtrain_torch
