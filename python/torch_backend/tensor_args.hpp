// What the backend hands dtrain for torch tensors: dtypes, reductions, the checks that refuse what
// it cannot do (devices other than CPU and CUDA, sparse and mixed tensors), and contiguous staging
// copies (on the device of the tensor; for CUDA tensors on the group's stream).
#pragma once

#include <string>
#include <vector>

#include "torch_includes.hpp"

namespace dtrain_torch {

// A contiguous tensor as dtrain sees it: count elements of dtype at ptr. Complex tensors are pairs
// of reals; dtypes dtrain has no name for move as bytes (data movement only).
struct Span {
  void* ptr = nullptr;
  size_t count = 0;
  dtrain_dtype_t dtype = DTRAIN_UINT8;
};

// Whether dtrain reduces this scalar type (complex ones as real pairs).
bool reducible(at::ScalarType t);
// The span of a contiguous tensor; `reduce` refuses what dtrain cannot reduce.
Span span_of(const at::Tensor& t, bool reduce, const char* op);
// Elements of dtype `span_of` gives per tensor element (2 for complex, the element size for bytes).
size_t units_per_element(at::ScalarType t);

// A reduction: a dtrain op, or a premultiplied sum by `scale` (made on the communicator per call).
struct Reduction {
  dtrain_op_t op = DTRAIN_SUM;
  bool premul = false;
  double scale = 1.0;
};
Reduction reduction_of(const c10d::ReduceOp& r, at::ScalarType t, const char* op);

// Refuses a tensor the backend cannot take (names the op and what is wrong): sparse, on a device
// other than the CPU and (where built with CUDA) CUDA.
void check_tensor(const at::Tensor& t, const char* op);
// The one device of an op's tensors (the CPU for none), after check_tensor on each.
at::Device device_of(const std::vector<at::Tensor>& ts, const char* op);
// check_tensor on each, and one dtype for all (the ops move or reduce them as one buffer).
void check_tensors(const std::vector<at::Tensor>& ts, const char* op);
// Exactly one tensor in the list (the ops take one; the list form is torch's multi-device API).
void check_single(const std::vector<at::Tensor>& ts, const char* op);

// A tensor's contiguous stand-in: the tensor itself when contiguous, else a copy; copy_back()
// writes an output copy into the caller's tensor.
struct Staged {
  at::Tensor user;
  at::Tensor buf;
  explicit Staged(const at::Tensor& t) : user(t), buf(t.is_contiguous() ? t : t.contiguous()) {}
  void copy_back() {
    if (!buf.is_same(user)) user.copy_(buf);
  }
};

// The tensors laid end to end in one new flat tensor (of ts[0]'s dtype), or without copying in when
// `fill` is false; unflatten() copies consecutive pieces of flat back into ts.
at::Tensor flatten(const std::vector<at::Tensor>& ts, bool fill = true);
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts);
size_t total_numel(const std::vector<at::Tensor>& ts);

}  // namespace dtrain_torch
