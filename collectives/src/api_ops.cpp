// The C ABI of version 0.3's operations: premultiplied-sum ops, reduce, gather, scatter, alltoall,
// alltoallv and recv_any. Host buffers go to the CPU communicator (comm_exchange.cpp); device
// buffers to the NCCL communicator (reduce through ncclReduce, the others through ncclSend/ncclRecv
// in one group; premultiplied sums through ncclRedOpCreatePreMulSum). In place as the header says:
// reduce with send == recv on the root, gather with the root's send == recv + root*sendcount, scatter
// with the root's recv == send + root*recvcount; any other overlap is DTRAIN_ERR_INVALID_ARGUMENT.
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "handle.hpp"
#include "in_place.hpp"

using namespace dtrain::coll;

extern "C" {

dtrain_status_t dtrain_redop_create_premul_sum(dtrain_comm_t comm, double scale, dtrain_op_t* op) {
  return guard([&] {
    if (op == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "premul_sum: op (the output pointer) is NULL");
    *op = cpu_of(comm).create_premul(scale);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_redop_destroy(dtrain_comm_t comm, dtrain_op_t op) {
  return guard([&] {
    cpu_of(comm).destroy_premul(op);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_reduce(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              dtrain_dtype_t dtype, dtrain_op_t op, int root, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    const bool at_root = c.rank() == root;
    if (at_root) check_same_or_apart("reduce", sendbuf, recvbuf, count, dtype);
    if (on_device(sendbuf, at_root ? recvbuf : nullptr)) {
      nccl::Comm& n = nccl_of(comm, sendbuf, at_root ? recvbuf : nullptr);
      return on_nccl(comm, [&] { n.reduce(sendbuf, recvbuf, count, dtype, op, c.premul_scale(op), root, stream); });
    }
    c.reduce(sendbuf, recvbuf, count, dtype, op, root);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_gather(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                              dtrain_dtype_t dtype, int root, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    const bool at_root = c.rank() == root;
    if (at_root) check_block_alias("gather", sendbuf, recvbuf, sendcount, dtype, c.rank(), c.size(),
                                   "sendbuf = recvbuf + root*sendcount");
    if (on_device(sendbuf, at_root ? recvbuf : nullptr)) {
      nccl::Comm& n = nccl_of(comm, sendbuf, at_root ? recvbuf : nullptr);
      return on_nccl(comm, [&] { n.gather(sendbuf, recvbuf, sendcount, dtype, root, stream); });
    }
    c.gather(sendbuf, recvbuf, sendcount, dtype, root);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_scatter(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                               dtrain_dtype_t dtype, int root, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    const bool at_root = c.rank() == root;
    if (at_root) check_block_alias("scatter", recvbuf, sendbuf, recvcount, dtype, c.rank(), c.size(),
                                   "recvbuf = sendbuf + root*recvcount");
    if (on_device(at_root ? sendbuf : nullptr, recvbuf)) {
      nccl::Comm& n = nccl_of(comm, at_root ? sendbuf : nullptr, recvbuf);
      return on_nccl(comm, [&] { n.scatter(sendbuf, recvbuf, recvcount, dtype, root, stream); });
    }
    c.scatter(sendbuf, recvbuf, recvcount, dtype, root);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_alltoall(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                dtrain_dtype_t dtype, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    const std::size_t bytes = count * elem_size(dtype) * static_cast<std::size_t>(c.size());
    if (overlap(sendbuf, bytes, recvbuf, bytes))
      throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "alltoall: sendbuf and recvbuf overlap; pass separate buffers");
    if (on_device(sendbuf, recvbuf)) {
      nccl::Comm& n = nccl_of(comm, sendbuf, recvbuf);
      std::vector<std::size_t> counts(static_cast<std::size_t>(c.size()), count), displs(counts.size());
      for (std::size_t r = 0; r < displs.size(); ++r) displs[r] = r * count;
      return on_nccl(comm, [&] {
        n.alltoallv(sendbuf, counts.data(), displs.data(), recvbuf, counts.data(), displs.data(), dtype, stream);
      });
    }
    c.alltoall(sendbuf, recvbuf, count, dtype);
    return DTRAIN_SUCCESS;
  });
}

dtrain_status_t dtrain_alltoallv(dtrain_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                                 dtrain_dtype_t dtype, void* stream) {
  return guard([&] {
    Communicator& c = cpu_of(comm);
    if (on_device(sendbuf, recvbuf)) {
      if (!sendcounts || !sdispls || !recvcounts || !rdispls)
        throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "alltoallv: a count or displacement array is NULL");
      nccl::Comm& n = nccl_of(comm, sendbuf, recvbuf);
      return on_nccl(comm, [&] { n.alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, stream); });
    }
    c.alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype);
    return DTRAIN_SUCCESS;
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
