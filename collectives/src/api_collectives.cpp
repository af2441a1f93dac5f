// The C ABI of the collectives: allreduce, broadcast, allgather, reduce_scatter, barrier, reduce,
// gather, scatter, alltoall, alltoallv and the premultiplied-sum ops. Each goes through dispatch()
// (handle.hpp): host buffers to the CPU communicator, device buffers to the NCCL communicator
// (reduce through ncclReduce, gather, scatter and alltoall(v) through ncclSend/ncclRecv in one
// group, premultiplied sums through ncclRedOpCreatePreMulSum).
//
// In place (both engines, the same forms): allreduce and broadcast take send == recv; allgather takes
// send == recv + rank*sendcount (NCCL's layout) or send == recv (this rank's contribution is the first
// sendcount elements of recv); reduce_scatter takes recv == send + rank*recvcount (NCCL's layout) or
// recv == send (the result lands in the first recvcount elements); reduce with send == recv on the
// root, gather with the root's send == recv + root*sendcount, scatter with the root's recv == send +
// root*recvcount. Host calls are normalised here (the extension forms become NCCL's layout) so the
// CPU engine sees out-of-place or NCCL-layout calls only; any other overlap of the two buffers is
// DTRAIN_ERR_INVALID_ARGUMENT on both engines.
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "handle.hpp"
#include "in_place.hpp"

using namespace dtrain::coll;

extern "C" {

dtrain_status_t dtrain_allreduce(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 dtrain_dtype_t dtype, dtrain_op_t op, void* stream) {
  return guard([&] {
    check_same_or_apart("allreduce", sendbuf, recvbuf, count, dtype);
    return dispatch(
        comm, {sendbuf, recvbuf}, [&](Communicator& c) { c.allreduce(sendbuf, recvbuf, count, dtype, op); },
        [&](nccl::Comm& n, Communicator& c) {
          n.allreduce(sendbuf, recvbuf, count, dtype, op, stream, c.premul_scale(op));
        });
  });
}

dtrain_status_t dtrain_broadcast(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 dtrain_dtype_t dtype, int root, void* stream) {
  return guard([&] {
    return dispatch(
        comm, {sendbuf, recvbuf}, [&](Communicator& c) { c.broadcast(sendbuf, recvbuf, count, dtype, root); },
        [&](nccl::Comm& n, Communicator&) { n.broadcast(sendbuf, recvbuf, count, dtype, root, stream); });
  });
}

dtrain_status_t dtrain_allgather(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                 dtrain_dtype_t dtype, void* stream) {
  return guard([&] {
    Communicator& cpu = cpu_of(comm);
    const bool same = allgather_alias(sendbuf, recvbuf, sendcount, dtype, cpu.rank(), cpu.size());
    auto host = [&](Communicator& c) {
      if (same && c.rank() != 0) {
        // send == recv: move this rank's contribution to its own block, then NCCL's in-place layout.
        const std::size_t bytes = sendcount * dtype_size(dtype);
        auto* own = static_cast<std::uint8_t*>(recvbuf) + bytes * static_cast<std::size_t>(c.rank());
        std::memcpy(own, recvbuf, bytes);  // disjoint: own starts at rank*bytes >= bytes
        c.allgather(own, recvbuf, sendcount, dtype);
      } else {
        c.allgather(sendbuf, recvbuf, sendcount, dtype);
      }
    };
    return dispatch(comm, {sendbuf, recvbuf}, host,
                    [&](nccl::Comm& n, Communicator&) { n.allgather(sendbuf, recvbuf, sendcount, dtype, stream); });
  });
}

dtrain_status_t dtrain_reduce_scatter(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                      dtrain_dtype_t dtype, dtrain_op_t op, void* stream) {
  return guard([&] {
    Communicator& cpu = cpu_of(comm);
    const bool same = reduce_scatter_alias(sendbuf, recvbuf, recvcount, dtype, cpu.rank(), cpu.size());
    auto host = [&](Communicator& c) {
      if (same && c.rank() != 0) {
        // recv == send: NCCL's in-place layout, then the result moves to the first recvcount elements.
        const std::size_t bytes = recvcount * dtype_size(dtype);
        auto* own = static_cast<std::uint8_t*>(recvbuf) + bytes * static_cast<std::size_t>(c.rank());
        c.reduce_scatter(sendbuf, own, recvcount, dtype, op);
        std::memcpy(recvbuf, own, bytes);  // disjoint: own starts at rank*bytes >= bytes
      } else {
        c.reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op);
      }
    };
    return dispatch(comm, {sendbuf, recvbuf}, host, [&](nccl::Comm& n, Communicator& c) {
      n.reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, stream, c.premul_scale(op));
    });
  });
}

dtrain_status_t dtrain_barrier(dtrain_comm_t comm) {
  return guard([&] {
    return dispatch(
        comm, {nullptr, nullptr, true}, [](Communicator& c) { c.barrier(); },
        [](nccl::Comm& n, Communicator&) { n.barrier(); });
  });
}

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
    const bool at_root = cpu_of(comm).rank() == root;
    if (at_root) check_same_or_apart("reduce", sendbuf, recvbuf, count, dtype);
    return dispatch(
        comm, {sendbuf, at_root ? recvbuf : nullptr},
        [&](Communicator& c) { c.reduce(sendbuf, recvbuf, count, dtype, op, root); },
        [&](nccl::Comm& n, Communicator& c) {
          n.reduce(sendbuf, recvbuf, count, dtype, op, c.premul_scale(op), root, stream);
        });
  });
}

dtrain_status_t dtrain_gather(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                              dtrain_dtype_t dtype, int root, void* stream) {
  return guard([&] {
    const Communicator& cpu = cpu_of(comm);
    const bool at_root = cpu.rank() == root;
    if (at_root)
      check_block_alias("gather", sendbuf, recvbuf, sendcount, dtype, cpu.rank(), cpu.size(),
                        "sendbuf = recvbuf + root*sendcount");
    return dispatch(
        comm, {sendbuf, at_root ? recvbuf : nullptr},
        [&](Communicator& c) { c.gather(sendbuf, recvbuf, sendcount, dtype, root); },
        [&](nccl::Comm& n, Communicator&) { n.gather(sendbuf, recvbuf, sendcount, dtype, root, stream); });
  });
}

dtrain_status_t dtrain_scatter(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                               dtrain_dtype_t dtype, int root, void* stream) {
  return guard([&] {
    const Communicator& cpu = cpu_of(comm);
    const bool at_root = cpu.rank() == root;
    if (at_root)
      check_block_alias("scatter", recvbuf, sendbuf, recvcount, dtype, cpu.rank(), cpu.size(),
                        "recvbuf = sendbuf + root*recvcount");
    return dispatch(
        comm, {at_root ? sendbuf : nullptr, recvbuf},
        [&](Communicator& c) { c.scatter(sendbuf, recvbuf, recvcount, dtype, root); },
        [&](nccl::Comm& n, Communicator&) { n.scatter(sendbuf, recvbuf, recvcount, dtype, root, stream); });
  });
}

dtrain_status_t dtrain_alltoall(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                dtrain_dtype_t dtype, void* stream) {
  return guard([&] {
    const auto size = static_cast<std::size_t>(cpu_of(comm).size());
    const std::size_t bytes = count * elem_size(dtype) * size;
    if (overlap(sendbuf, bytes, recvbuf, bytes))
      throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "alltoall: sendbuf and recvbuf overlap; pass separate buffers");
    return dispatch(
        comm, {sendbuf, recvbuf}, [&](Communicator& c) { c.alltoall(sendbuf, recvbuf, count, dtype); },
        [&](nccl::Comm& n, Communicator&) {
          std::vector<std::size_t> counts(size, count), displs(size);
          for (std::size_t r = 0; r < size; ++r) displs[r] = r * count;
          n.alltoallv(sendbuf, counts.data(), displs.data(), recvbuf, counts.data(), displs.data(), dtype, stream);
        });
  });
}

dtrain_status_t dtrain_alltoallv(dtrain_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                                 dtrain_dtype_t dtype, void* stream) {
  return guard([&] {
    return dispatch(
        comm, {sendbuf, recvbuf},
        [&](Communicator& c) { c.alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype); },
        [&](nccl::Comm& n, Communicator&) {
          if (!sendcounts || !sdispls || !recvcounts || !rdispls)
            throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "alltoallv: a count or displacement array is NULL");
          n.alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, stream);
        });
  });
}

}  // extern "C"
