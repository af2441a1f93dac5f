// The NCCL communicator's operations of C ABI 0.3: ncclReduce; gather, scatter and alltoallv as
// ncclSend/ncclRecv inside one ncclGroupStart/End (the root's own block, or this rank's own part of an
// alltoallv, as a device-to-device copy on the same stream); premultiplied sums through
// ncclRedOpCreatePreMulSum with the scale as a host immediate in the buffers' dtype, made for the call
// and destroyed once it is enqueued (NCCL allows that).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "nccl_core.hpp"

namespace dtrain::coll::nccl {

void Communicator::check_root(const Op& op, int root) const {
  if (root < 0 || root >= size_)
    throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                fmt::format("{}: root {} is not a rank of this communicator (0..{})", describe(op), root, size_ - 1));
}

ncclRedOp_t Communicator::reduction(dtrain_dtype_t dtype, dtrain_op_t op, const double* premul) {
  if (premul == nullptr) return to_nccl(dtype, op);
  if (comm_ == nullptr) return ncclSum;  // aborted: run() reports it
  const ncclDataType_t type = to_nccl(dtype);
  ncclRedOp_t red{};
  DeviceGuard guard(device_);
  ncclResult_t r = ncclInvalidArgument;
  switch (dtype) {
    case DTRAIN_FLOAT16: {
      __half h = __float2half(static_cast<float>(*premul));
      r = ncclRedOpCreatePreMulSum(&red, &h, type, ncclScalarHostImmediate, comm_);
      break;
    }
    case DTRAIN_BFLOAT16: {
      __nv_bfloat16 b = __float2bfloat16(static_cast<float>(*premul));
      r = ncclRedOpCreatePreMulSum(&red, &b, type, ncclScalarHostImmediate, comm_);
      break;
    }
    case DTRAIN_FLOAT32: {
      float f = static_cast<float>(*premul);
      r = ncclRedOpCreatePreMulSum(&red, &f, type, ncclScalarHostImmediate, comm_);
      break;
    }
    case DTRAIN_FLOAT64: {
      double d = *premul;
      r = ncclRedOpCreatePreMulSum(&red, &d, type, ncclScalarHostImmediate, comm_);
      break;
    }
    default:
      throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                  fmt::format("a premultiplied sum takes a floating dtype, not {}", dtype_name(dtype)));
  }
  check_nccl(r, "ncclRedOpCreatePreMulSum", comm_);
  return red;
}

void Communicator::release_op(ncclRedOp_t red, const double* premul) noexcept {
  if (premul != nullptr && comm_ != nullptr) ncclRedOpDestroy(red, comm_);
}

void Communicator::run_reduction(const Op& op, void* stream, dtrain_dtype_t dtype, dtrain_op_t red_op,
                                 const double* premul,
                                 const std::function<ncclResult_t(cudaStream_t, ncclRedOp_t)>& enqueue,
                                 const std::function<void(cudaStream_t)>& after) {
  const ncclRedOp_t red = reduction(dtype, red_op, premul);
  try {
    run(op, stream, [&](cudaStream_t s) { return enqueue(s, red); }, after);
  } catch (...) {
    release_op(red, premul);
    throw;
  }
  release_op(red, premul);
}

void Communicator::reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                          const double* premul, int root, void* stream) {
  const Op info{"reduce", count, dtype, premul ? "premul_sum" : op_name(op)};
  check_root(info, root);
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t bytes = count * dtype_size(dtype);
  check_buffer(send, "sendbuf", bytes);
  if (rank_ == root && recv != send) check_buffer(recv, "recvbuf", bytes);
  run_reduction(info, stream, dtype, op, premul, [&](cudaStream_t s, ncclRedOp_t red) {
    return ncclReduce(send, recv, count, type, red, root, comm_, s);
  });
}

void Communicator::gather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int root,
                          void* stream) {
  const Op info{"gather", sendcount, dtype, nullptr};
  check_root(info, root);
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t bytes = sendcount * dtype_size(dtype);
  auto* own = static_cast<char*>(recv) + bytes * static_cast<std::size_t>(rank_);
  if (rank_ == root) check_buffer(recv, "recvbuf", bytes * static_cast<std::size_t>(size_));
  if (rank_ != root || send != own) check_buffer(send, "sendbuf", bytes);
  run(info, stream, [&](cudaStream_t s) {
    if (rank_ == root && send != own && bytes != 0)
      check_cuda(cudaMemcpyAsync(own, send, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    if (rank_ != root) {
      r = ncclSend(send, sendcount, type, root, comm_, s);
    } else {
      for (int p = 0; p < size_ && r == ncclSuccess; ++p)
        if (p != root)
          r = ncclRecv(static_cast<char*>(recv) + bytes * static_cast<std::size_t>(p), sendcount, type, p, comm_, s);
    }
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

void Communicator::scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int root,
                           void* stream) {
  const Op info{"scatter", recvcount, dtype, nullptr};
  check_root(info, root);
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t bytes = recvcount * dtype_size(dtype);
  const auto* own = static_cast<const char*>(send) + bytes * static_cast<std::size_t>(rank_);
  if (rank_ == root) check_buffer(send, "sendbuf", bytes * static_cast<std::size_t>(size_));
  if (rank_ != root || recv != own) check_buffer(recv, "recvbuf", bytes);
  run(info, stream, [&](cudaStream_t s) {
    if (rank_ == root && recv != own && bytes != 0)
      check_cuda(cudaMemcpyAsync(recv, own, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    if (rank_ != root) {
      r = ncclRecv(recv, recvcount, type, root, comm_, s);
    } else {
      for (int p = 0; p < size_ && r == ncclSuccess; ++p)
        if (p != root)
          r = ncclSend(static_cast<const char*>(send) + bytes * static_cast<std::size_t>(p), recvcount, type, p, comm_,
                       s);
    }
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

void Communicator::alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                             const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype,
                             void* stream) {
  const Op info{"alltoallv", kNoCount, dtype, nullptr};
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t esz = dtype_size(dtype);
  const auto me = static_cast<std::size_t>(rank_);
  if (sendcounts[me] != recvcounts[me])
    throw Error(DTRAIN_ERR_MISMATCH, fmt::format("{}: rank {} sends {} elements to itself but receives {}",
                                                 describe(info), rank_, sendcounts[me], recvcounts[me]));
  run(info, stream, [&](cudaStream_t s) {
    if (sendcounts[me] != 0)
      check_cuda(cudaMemcpyAsync(static_cast<char*>(recv) + rdispls[me] * esz,
                                 static_cast<const char*>(send) + sdispls[me] * esz, sendcounts[me] * esz,
                                 cudaMemcpyDeviceToDevice, s),
                 "cudaMemcpyAsync");
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
      if (p == rank_) continue;
      const auto q = static_cast<std::size_t>(p);
      r = ncclSend(static_cast<const char*>(send) + sdispls[q] * esz, sendcounts[q], type, p, comm_, s);
      if (r == ncclSuccess)
        r = ncclRecv(static_cast<char*>(recv) + rdispls[q] * esz, recvcounts[q], type, p, comm_, s);
    }
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

}  // namespace dtrain::coll::nccl
