// The torch versions the backend builds against, told apart by <torch/version.h> alone: torch 1.13's
// c10d::ProcessGroup, and from torch 2.0 on a c10d::Backend that torch's ProcessGroup dispatches to
// per device. Every difference is a named feature here, decided by comparing (major, minor) with
// the version that introduced it, so each holds for every later torch (3.x included).
#pragma once

#include <torch/version.h>

#define DTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// Each feature below names the torch release that introduced it. The backend was compiled here
// against 1.13 and 2.6; the other boundaries come from torch's history (a later boundary than the
// true one costs the feature on the releases between, never the build).
//
// 2.0: c10d::Backend, registered per device (Backend.register_backend(devices=...)).
#define DTRAIN_TORCH_BACKEND DTRAIN_TORCH_AT_LEAST(2, 0)
// 2.1: the coalescing hooks end with one Work for the batch; allgather_into_tensor_coalesced and
// reduce_scatter_tensor_coalesced.
#define DTRAIN_TORCH_TENSOR_COALESCED DTRAIN_TORCH_AT_LEAST(2, 1)
// 2.3: Backend::supportsSplitting and eagerConnectSingleDevice (init_process_group(device_id=...)).
#define DTRAIN_TORCH_EAGER_CONNECT DTRAIN_TORCH_AT_LEAST(2, 3)
// 2.7: Backend::supportsCoalescing (batch_isend_irecv coalesces for every backend that says so) and
// Backend::abort / Backend::shutdown (ProcessGroup::abort, shutdown; destroy_process_group,
// _abort_process_group).
#define DTRAIN_TORCH_BACKEND_LIFECYCLE DTRAIN_TORCH_AT_LEAST(2, 7)
// 2.10: Backend::split(store, ranks, options) and getBackendOptions (ProcessGroup::splitGroup,
// dist.split_group).
#define DTRAIN_TORCH_BACKEND_SPLIT DTRAIN_TORCH_AT_LEAST(2, 10)

#if !DTRAIN_TORCH_AT_LEAST(1, 13)
#error "the dtrain torch backend needs torch 1.13 or later"
#endif

#if DTRAIN_TORCH_BACKEND
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace dtrain_torch {

#if DTRAIN_TORCH_BACKEND
using TorchBackend = c10d::Backend;
#else
using TorchBackend = c10d::ProcessGroup;
#endif

// An options struct's asyncOp, on the torch versions whose struct has one (false: the caller waits
// for the op before it goes on); true where it has none.
template <typename Options>
auto async_op_of(const Options& o, int) -> decltype(static_cast<bool>(o.asyncOp)) {
  return o.asyncOp;
}
template <typename Options>
bool async_op_of(const Options&, long) {
  return true;
}
template <typename Options>
bool async_op(const Options& o) {
  return async_op_of(o, 0);
}

// The tensor factor of a premultiplied sum: NCCLPreMulSumSupplement holds a list of them up to
// torch 2.0 (tensor_factors) and one from 2.1 (tensor_factor); an undefined tensor when the factor is
// a double.
template <typename Supplement>
auto premul_tensor_of(const Supplement& s, int) -> decltype(s.tensor_factor, at::Tensor()) {
  return s.tensor_factor;
}
template <typename Supplement>
auto premul_tensor_of(const Supplement& s, long) -> decltype(s.tensor_factors, at::Tensor()) {
  TORCH_CHECK(s.tensor_factors.size() <= 1, "dtrain backend: PREMUL_SUM takes one factor, got ",
              s.tensor_factors.size());
  return s.tensor_factors.empty() ? at::Tensor() : s.tensor_factors[0];
}

}  // namespace dtrain_torch
