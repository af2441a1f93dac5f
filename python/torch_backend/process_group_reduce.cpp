// ProcessGroupDtrain's reductions: allreduce, allreduce_coalesced, reduce, reduce_scatter and
// _reduce_scatter_base, with every ReduceOp (PREMUL_SUM as a dtrain premultiplied-sum op).
#include "process_group.hpp"

namespace dtrain_torch {

template <typename F>
void ProcessGroupDtrain::with_op(const Reduction& r, const char* op, F&& call) {
  if (!r.premul) {
    check(call(r.op), op);
    return;
  }
  dtrain_op_t premul;
  check(dtrain_redop_create_premul_sum(comm_, r.scale, &premul), op);
  const dtrain_status_t st = call(premul);
  dtrain_redop_destroy(comm_, premul);
  check(st, op);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  static const char* const op = "all_reduce";
  check_single(tensors, op);
  const Reduction red = reduction_of(opts.reduceOp, tensors[0].scalar_type(), op);
  span_of(tensors[0], true, op);
  at::Tensor t = tensors[0];
  return enqueue(c10d::OpType::ALLREDUCE, op, tensors, opts.timeout, [this, t, red](DtrainWork&) {
    Staged s(t);
    const Span sp = span_of(s.buf, true, op);
    with_op(red, op,
            [&](dtrain_op_t o) { return dtrain_allreduce(comm_, sp.ptr, sp.ptr, sp.count, sp.dtype, o, nullptr); });
    s.copy_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  static const char* const op = "all_reduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "dtrain backend: ", op, " got no tensors");
  check_tensors(tensors, op);
  const Reduction red = reduction_of(opts.reduceOp, tensors[0].scalar_type(), op);
  span_of(tensors[0], true, op);
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, op, tensors, opts.timeout, [this, tensors, red](DtrainWork&) {
    at::Tensor flat = flatten(tensors);
    const Span sp = span_of(flat, true, op);
    with_op(red, op,
            [&](dtrain_op_t o) { return dtrain_allreduce(comm_, sp.ptr, sp.ptr, sp.count, sp.dtype, o, nullptr); });
    unflatten(flat, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  static const char* const op = "reduce";
  check_single(tensors, op);
  check_root(opts.rootRank, op);
  const Reduction red = reduction_of(opts.reduceOp, tensors[0].scalar_type(), op);
  span_of(tensors[0], true, op);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor t = tensors[0];
  return enqueue(c10d::OpType::REDUCE, op, tensors, opts.timeout, [this, t, red, root](DtrainWork&) {
    Staged s(t);
    const Span sp = span_of(s.buf, true, op);
    void* out = rank_ == root ? sp.ptr : nullptr;
    with_op(red, op,
            [&](dtrain_op_t o) { return dtrain_reduce(comm_, sp.ptr, out, sp.count, sp.dtype, o, root, nullptr); });
    if (rank_ == root) s.copy_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  static const char* const op = "reduce_scatter";
  check_single(outputs, op);
  TORCH_CHECK(inputs.size() == 1, "dtrain backend: ", op, " takes one list of input tensors, got ", inputs.size());
  const std::vector<at::Tensor>& in = inputs[0];
  TORCH_CHECK(static_cast<int>(in.size()) == size_, "dtrain backend: ", op, " takes one input tensor per rank (", size_,
              "), got ", in.size());
  check_tensors(in, op);
  for (const auto& t : in) {
    TORCH_CHECK(t.numel() == outputs[0].numel() && t.scalar_type() == outputs[0].scalar_type(), "dtrain backend: ", op,
                " takes inputs of the output's size and dtype (", outputs[0].numel(), " x ", outputs[0].scalar_type(),
                "), got ", t.numel(), " x ", t.scalar_type());
  }
  const Reduction red = reduction_of(opts.reduceOp, outputs[0].scalar_type(), op);
  span_of(outputs[0], true, op);
  at::Tensor out = outputs[0];
  return enqueue(c10d::OpType::REDUCE_SCATTER, op, outputs, opts.timeout, [this, out, in, red](DtrainWork&) {
    at::Tensor flat = flatten(in);
    Staged s(out);
    const Span src = span_of(flat, true, op);
    const Span dst = span_of(s.buf, true, op);
    with_op(red, op, [&](dtrain_op_t o) {
      return dtrain_reduce_scatter(comm_, src.ptr, dst.ptr, dst.count, dst.dtype, o, nullptr);
    });
    s.copy_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  static const char* const op = "_reduce_scatter_base";
  check_tensors({output, input}, op);
  TORCH_CHECK(input.numel() == output.numel() * size_, "dtrain backend: ", op, " takes an input of ", size_,
              " x the output's elements (", output.numel() * size_, "), got ", input.numel());
  const Reduction red = reduction_of(opts.reduceOp, output.scalar_type(), op);
  span_of(output, true, op);
  at::Tensor out = output;
  at::Tensor in = input;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, op, {output}, opts.timeout, [this, out, in, red](DtrainWork&) {
    const at::Tensor src_buf = in.contiguous();
    Staged s(out);
    const Span src = span_of(src_buf, true, op);
    const Span dst = span_of(s.buf, true, op);
    with_op(red, op, [&](dtrain_op_t o) {
      return dtrain_reduce_scatter(comm_, src.ptr, dst.ptr, dst.count, dst.dtype, o, nullptr);
    });
    s.copy_back();
  });
}

}  // namespace dtrain_torch
