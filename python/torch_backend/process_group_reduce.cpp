// ProcessGroupDtrain's reductions: allreduce, allreduce_coalesced, reduce, reduce_scatter,
// _reduce_scatter_base (reduce_scatter_tensor) and its coalesced form, with every ReduceOp
// (PREMUL_SUM as a dtrain premultiplied-sum op). Contiguous tensors go to dtrain as they are.
#include "process_group.hpp"

namespace dtrain_torch {

namespace {

void check_scatter_pair(const at::Tensor& output, const at::Tensor& input, int size, const char* op) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "dtrain backend: ", op, " got an input of dtype ",
              input.scalar_type(), " and an output of dtype ", output.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size, "dtrain backend: ", op, " takes an input of ", size,
              " x the output's elements (", output.numel() * size, "), got ", input.numel());
}

}  // namespace

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
  return enqueue({c10d::OpType::ALLREDUCE, op, tensors, tensors, opts.timeout, async_op(opts)},
                 [this, t, red](DtrainWork& w) {
                   Staged s(t);
                   const Span sp = span_of(s.buf, true, op);
                   with_op(red, op, [&](dtrain_op_t o) {
                     return dtrain_allreduce(comm_, sp.ptr, sp.ptr, sp.count, sp.dtype, o, w.stream());
                   });
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
  return enqueue({c10d::OpType::ALLREDUCE_COALESCED, op, tensors, tensors, opts.timeout, async_op(opts)},
                 [this, tensors, red](DtrainWork& w) {
                   at::Tensor flat = flatten(tensors);
                   const Span sp = span_of(flat, true, op);
                   with_op(red, op, [&](dtrain_op_t o) {
                     return dtrain_allreduce(comm_, sp.ptr, sp.ptr, sp.count, sp.dtype, o, w.stream());
                   });
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
  return enqueue({c10d::OpType::REDUCE, op, tensors, tensors, opts.timeout, async_op(opts)},
                 [this, t, red, root](DtrainWork& w) {
                   Staged s(t);
                   const Span sp = span_of(s.buf, true, op);
                   void* out = rank_ == root ? sp.ptr : nullptr;
                   with_op(red, op, [&](dtrain_op_t o) {
                     return dtrain_reduce(comm_, sp.ptr, out, sp.count, sp.dtype, o, root, w.stream());
                   });
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
  std::vector<at::Tensor> used(in);
  used.push_back(out);
  return enqueue({c10d::OpType::REDUCE_SCATTER, op, used, outputs, opts.timeout, async_op(opts)},
                 [this, out, in, red](DtrainWork& w) {
                   at::Tensor flat = flatten(in);
                   Staged s(out);
                   const Span src = span_of(flat, true, op);
                   const Span dst = span_of(s.buf, true, op);
                   with_op(red, op, [&](dtrain_op_t o) {
                     return dtrain_reduce_scatter(comm_, src.ptr, dst.ptr, dst.count, dst.dtype, o, w.stream());
                   });
                   s.copy_back();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  static const char* const op = "reduce_scatter_tensor";
  check_tensors({output, input}, op);
  check_scatter_pair(output, input, size_, op);
  const Reduction red = reduction_of(opts.reduceOp, output.scalar_type(), op);
  span_of(output, true, op);
  at::Tensor out = output;
  at::Tensor in = input;
  return enqueue({c10d::OpType::_REDUCE_SCATTER_BASE, op, {output, input}, {output}, opts.timeout, async_op(opts)},
                 [this, out, in, red](DtrainWork& w) { reduce_scatter_into(out, in, red, op, w.stream()); });
}

// No copy for contiguous tensors: the input itself, and the output itself when Staged.
void ProcessGroupDtrain::reduce_scatter_into(const at::Tensor& out, const at::Tensor& in, const Reduction& red,
                                             const char* op, void* stream) {
  const at::Tensor src_buf = in.contiguous();
  Staged s(out);
  const Span src = span_of(src_buf, true, op);
  const Span dst = span_of(s.buf, true, op);
  with_op(red, op, [&](dtrain_op_t o) {
    return dtrain_reduce_scatter(comm_, src.ptr, dst.ptr, dst.count, dst.dtype, o, stream);
  });
  s.copy_back();
}

#if DTRAIN_TORCH_TENSOR_COALESCED
// One reduce-scatter per (output, input) pair, run back to back in one op (no copies for contiguous
// tensors): FSDP's and the functional collectives' coalesced form.
c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  static const char* const op = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(), "dtrain backend: ", op,
              " takes as many outputs as inputs (at least one), got ", outputs.size(), " and ", inputs.size());
  std::vector<at::Tensor> used(outputs);
  used.insert(used.end(), inputs.begin(), inputs.end());
  std::vector<Reduction> reds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensors({outputs[i], inputs[i]}, op);
    check_scatter_pair(outputs[i], inputs[i], size_, op);
    reds.push_back(reduction_of(opts.reduceOp, outputs[i].scalar_type(), op));
    span_of(outputs[i], true, op);
  }
  return enqueue({c10d::OpType::COALESCED, op, used, outputs, opts.timeout, async_op(opts)},
                 [this, outputs, inputs, reds](DtrainWork& w) {
                   for (size_t i = 0; i < outputs.size(); ++i)
                     reduce_scatter_into(outputs[i], inputs[i], reds[i], op, w.stream());
                 });
}
#endif

}  // namespace dtrain_torch
