// ProcessGroupDtrain's data movement: broadcast, allgather (list, _base = all_gather_into_tensor,
// both coalesced forms), gather, scatter. Any dtype moves (those dtrain has no name for, as bytes);
// lists go through one flat buffer; contiguous tensors go to dtrain as they are.
#include "process_group.hpp"

namespace dtrain_torch {

namespace {

void check_same(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op, const char* what) {
  for (const auto& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "dtrain backend: ", op, " takes ",
                what, " of the input's size and dtype (", like.numel(), " x ", like.scalar_type(), "), got ", t.numel(),
                " x ", t.scalar_type());
  }
}

void check_gather_pair(const at::Tensor& output, const at::Tensor& input, int size, const char* op) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "dtrain backend: ", op, " got an input of dtype ",
              input.scalar_type(), " and an output of dtype ", output.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size, "dtrain backend: ", op, " takes an output of ", size,
              " x the input's elements (", input.numel() * size, "), got ", output.numel());
}

std::vector<at::Tensor> joined(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> all;
  for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  return all;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  static const char* const op = "broadcast";
  check_single(tensors, op);
  check_root(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor t = tensors[0];
  return enqueue({c10d::OpType::BROADCAST, op, tensors, tensors, opts.timeout, async_op(opts)},
                 [this, t, root](DtrainWork& w) {
                   Staged s(t);
                   const Span sp = span_of(s.buf, false, op);
                   check(dtrain_broadcast(comm_, sp.ptr, sp.ptr, sp.count, sp.dtype, root, w.stream()), op);
                   if (rank_ != root) s.copy_back();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  static const char* const op = "all_gather";
  check_single(inputs, op);
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "dtrain backend: ", op,
              " takes one list of ", size_, " output tensors");
  check_same(outputs[0], inputs[0], op, "outputs");
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  std::vector<at::Tensor> used(outs);
  used.push_back(in);
  return enqueue({c10d::OpType::ALLGATHER, op, used, outs, opts.timeout, async_op(opts)},
                 [this, in, outs](DtrainWork& w) {
                   const at::Tensor src = in.contiguous();
                   at::Tensor flat = flatten(outs, false);
                   const Span sp = span_of(src, false, op);
                   check(dtrain_allgather(comm_, sp.ptr, flat.data_ptr(), sp.count, sp.dtype, w.stream()), op);
                   unflatten(flat, outs);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions& opts) {
  static const char* const op = "all_gather_into_tensor";
  check_tensors({output, input}, op);
  check_gather_pair(output, input, size_, op);
  at::Tensor out = output;
  at::Tensor in = input;
  return enqueue({c10d::OpType::_ALLGATHER_BASE, op, {output, input}, {output}, opts.timeout, async_op(opts)},
                 [this, out, in](DtrainWork& w) { allgather_into(out, in, op, w.stream()); });
}

// No copy for contiguous tensors: the input itself, and the output itself when Staged.
void ProcessGroupDtrain::allgather_into(const at::Tensor& out, const at::Tensor& in, const char* op, void* stream) {
  const at::Tensor src = in.contiguous();
  Staged s(out);
  const Span sp = span_of(src, false, op);
  check(dtrain_allgather(comm_, sp.ptr, s.buf.data_ptr(), sp.count, sp.dtype, stream), op);
  s.copy_back();
}

#if DTRAIN_TORCH_TENSOR_COALESCED
// One all-gather per (output, input) pair, run back to back in one op (no copies for contiguous
// tensors): FSDP's and the functional collectives' coalesced form.
c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                   std::vector<at::Tensor>& inputs,
                                                                                   const c10d::AllgatherOptions& opts) {
  static const char* const op = "all_gather_into_tensor_coalesced";
  TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(), "dtrain backend: ", op,
              " takes as many outputs as inputs (at least one), got ", outputs.size(), " and ", inputs.size());
  std::vector<at::Tensor> used(outputs);
  used.insert(used.end(), inputs.begin(), inputs.end());
  for (const auto& t : used) check_tensor(t, op);
  for (size_t i = 0; i < outputs.size(); ++i) check_gather_pair(outputs[i], inputs[i], size_, op);
  return enqueue({c10d::OpType::COALESCED, op, used, outputs, opts.timeout, async_op(opts)},
                 [this, outputs, inputs](DtrainWork& w) {
                   for (size_t i = 0; i < outputs.size(); ++i) allgather_into(outputs[i], inputs[i], op, w.stream());
                 });
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                       std::vector<at::Tensor>& inputs,
                                                                       const c10d::AllgatherOptions& opts) {
  static const char* const op = "all_gather_coalesced";
  TORCH_CHECK(!inputs.empty(), "dtrain backend: ", op, " got no input tensors");
  check_tensors(inputs, op);
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "dtrain backend: ", op, " takes one output list per rank (",
              size_, "), got ", outputs.size());
  for (const auto& l : outputs) {
    TORCH_CHECK(l.size() == inputs.size(), "dtrain backend: ", op, " takes output lists as long as the input list (",
                inputs.size(), "), got ", l.size());
    for (size_t i = 0; i < l.size(); ++i) check_same({l[i]}, inputs[i], op, "outputs");
  }
  std::vector<at::Tensor> outs = joined(outputs);
  std::vector<at::Tensor> used(outs);
  used.insert(used.end(), inputs.begin(), inputs.end());
  return enqueue({c10d::OpType::ALLGATHER_COALESCED, op, used, outs, opts.timeout, async_op(opts)},
                 [this, inputs, outs](DtrainWork& w) {
                   const at::Tensor src = flatten(inputs);
                   at::Tensor flat = flatten(outs, false);
                   const Span sp = span_of(src, false, op);
                   check(dtrain_allgather(comm_, sp.ptr, flat.data_ptr(), sp.count, sp.dtype, w.stream()), op);
                   unflatten(flat, outs);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  static const char* const op = "gather";
  check_single(inputs, op);
  check_root(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "dtrain backend: ", op,
                " takes one list of ", size_, " output tensors on the root");
    check_same(outputs[0], inputs[0], op, "outputs");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), "dtrain backend: ", op,
                " takes output tensors on the root (rank ", root, ") only");
  }
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> used(outs);
  used.push_back(in);
  return enqueue({c10d::OpType::GATHER, op, used, outs, opts.timeout, async_op(opts)},
                 [this, in, outs, root](DtrainWork& w) {
                   const at::Tensor src = in.contiguous();
                   const Span sp = span_of(src, false, op);
                   at::Tensor flat = outs.empty() ? at::Tensor() : flatten(outs, false);
                   check(dtrain_gather(comm_, sp.ptr, flat.defined() ? flat.data_ptr() : nullptr, sp.count, sp.dtype,
                                       root, w.stream()),
                         op);
                   if (flat.defined()) unflatten(flat, outs);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  static const char* const op = "scatter";
  check_single(outputs, op);
  check_root(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "dtrain backend: ", op,
                " takes one list of ", size_, " input tensors on the root");
    check_same(inputs[0], outputs[0], op, "inputs");
    ins = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), "dtrain backend: ", op,
                " takes input tensors on the root (rank ", root, ") only");
  }
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> used(ins);
  used.push_back(out);
  return enqueue({c10d::OpType::SCATTER, op, used, outputs, opts.timeout, async_op(opts)},
                 [this, out, ins, root](DtrainWork& w) {
                   const at::Tensor flat = ins.empty() ? at::Tensor() : flatten(ins);
                   Staged s(out);
                   const Span sp = span_of(s.buf, false, op);
                   check(dtrain_scatter(comm_, flat.defined() ? flat.data_ptr() : nullptr, sp.ptr, sp.count, sp.dtype,
                                        root, w.stream()),
                         op);
                   s.copy_back();
                 });
}

}  // namespace dtrain_torch
