// ProcessGroupDtrain's all-to-all: alltoall_base (equal or uneven splits along dim 0) and alltoall
// (a list of tensors of any sizes), over dtrain_alltoall and dtrain_alltoallv.
#include <numeric>

#include "process_group.hpp"

namespace dtrain_torch {

namespace {

// Element counts (in the span's units) per rank for a tensor cut along dim 0 by `splits` (empty:
// equal parts).
std::vector<size_t> counts_of(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* op,
                              const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t per_row = rows == 0 ? 0 : t.numel() / rows;
  const size_t units = units_per_element(t.scalar_type());
  std::vector<size_t> counts(static_cast<size_t>(size));
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "dtrain backend: ", op, ": the ", what, "'s first dimension (", rows,
                ") does not split into ", size, " equal parts; pass split sizes");
    for (auto& c : counts) c = static_cast<size_t>(rows / size * per_row) * units;
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "dtrain backend: ", op, " takes one ", what,
              " split size per rank (", size, "), got ", splits.size());
  int64_t sum = 0;
  for (size_t r = 0; r < splits.size(); ++r) {
    TORCH_CHECK(splits[r] >= 0, "dtrain backend: ", op, ": negative ", what, " split size ", splits[r]);
    sum += splits[r];
    counts[r] = static_cast<size_t>(splits[r] * per_row) * units;
  }
  TORCH_CHECK(sum == rows, "dtrain backend: ", op, ": the ", what, " split sizes add up to ", sum,
              ", not the first dimension (", rows, ")");
  return counts;
}

std::vector<size_t> displacements(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) d[r] = d[r - 1] + counts[r - 1];
  return d;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& output_splits,
                                                                 std::vector<int64_t>& input_splits,
                                                                 const c10d::AllToAllOptions& opts) {
  static const char* const op = "all_to_all_single";
  check_tensors({output, input}, op);
  const std::vector<size_t> send = counts_of(input, input_splits, size_, op, "input");
  const std::vector<size_t> recv = counts_of(output, output_splits, size_, op, "output");
  const bool even = input_splits.empty() && output_splits.empty();
  TORCH_CHECK(!even || input.numel() == output.numel(), "dtrain backend: ", op,
              " with equal splits takes an input and an output of one size, got ", input.numel(), " and ",
              output.numel(), " elements");
  at::Tensor out = output;
  at::Tensor in = input;
  return enqueue(
      {c10d::OpType::ALLTOALL_BASE, op, {output, input}, {output}, opts.timeout, async_op(opts)},
      [this, out, in, send, recv, even](DtrainWork& w) {
        const at::Tensor src = in.contiguous();
        Staged s(out);
        const Span sp = span_of(src, false, op);
        const Span dp = span_of(s.buf, false, op);
        if (even) {
          check(dtrain_alltoall(comm_, sp.ptr, dp.ptr, sp.count / static_cast<size_t>(size_), sp.dtype, w.stream()),
                op);
        } else {
          const std::vector<size_t> sd = displacements(send);
          const std::vector<size_t> rd = displacements(recv);
          check(dtrain_alltoallv(comm_, sp.ptr, send.data(), sd.data(), dp.ptr, recv.data(), rd.data(), sp.dtype,
                                 w.stream()),
                op);
        }
        s.copy_back();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  static const char* const op = "all_to_all";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "dtrain backend: ", op, " takes one input and one output tensor per rank (", size_, "), got ",
              inputs.size(), " and ", outputs.size());
  std::vector<at::Tensor> all(inputs);
  all.insert(all.end(), outputs.begin(), outputs.end());
  check_tensors(all, op);
  const size_t units = units_per_element(inputs[0].scalar_type());
  std::vector<size_t> send, recv;
  for (const auto& t : inputs) send.push_back(static_cast<size_t>(t.numel()) * units);
  for (const auto& t : outputs) recv.push_back(static_cast<size_t>(t.numel()) * units);
  return enqueue({c10d::OpType::ALLTOALL, op, all, outputs, opts.timeout, async_op(opts)},
                 [this, inputs, outputs, send, recv](DtrainWork& w) {
    const at::Tensor src = flatten(inputs);
    at::Tensor dst = flatten(outputs, false);
    const Span sp = span_of(src, false, op);
    const std::vector<size_t> sd = displacements(send);
    const std::vector<size_t> rd = displacements(recv);
    check(dtrain_alltoallv(comm_, sp.ptr, send.data(), sd.data(), dst.data_ptr(), recv.data(), rd.data(), sp.dtype,
                           w.stream()),
          op);
    unflatten(dst, outputs);
  });
}

}  // namespace dtrain_torch
