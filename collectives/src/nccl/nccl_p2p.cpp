// The NCCL communicator's point-to-point (ncclSend/ncclRecv in one group, run like a collective:
// enqueued on the caller's stream, or waited for against the deadline without one) and
// ncclCommSplit (in non-blocking mode, polled until the new communicator is ready; NCCL orders the
// new ranks by key, then by parent rank, as the CPU split does, which is checked).
#include "dtrain/common/log.hpp"
#include "nccl_core.hpp"

namespace dtrain::coll::nccl {

void Communicator::sendrecv(const void* send, std::size_t sendcount, dtrain_dtype_t sendtype, int dest, void* recv,
                            std::size_t recvcount, dtrain_dtype_t recvtype, int source, void* stream) {
  const bool sending = dest >= 0, receiving = source >= 0;
  const std::string peers = fmt::format("{}{}{}", sending ? fmt::format("to rank {}", dest) : "",
                                        sending && receiving ? ", " : "",
                                        receiving ? fmt::format("from rank {}", source) : "");
  const Op info{sending && receiving ? "sendrecv" : sending ? "send" : "recv", sending ? sendcount : recvcount,
                sending ? sendtype : recvtype, peers.c_str()};
  for (int peer : {dest, source})
    if (peer >= size_)
      throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                  fmt::format("{}: peer {} is not a rank of this communicator (0..{})", describe(info), peer, size_ - 1));
  const ncclDataType_t stype = to_nccl(sendtype), rtype = to_nccl(recvtype);
  if (sending) check_buffer(send, "sendbuf", sendcount * dtype_size(sendtype));
  if (receiving) check_buffer(recv, "recvbuf", recvcount * dtype_size(recvtype));
  run(info, stream, [&](cudaStream_t s) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    if (sending) r = ncclSend(send, sendcount, stype, dest, comm_, s);
    if (r == ncclSuccess && receiving) r = ncclRecv(recv, recvcount, rtype, source, comm_, s);
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

Communicator::Communicator(Adopt, ncclComm_t comm, const Options& options, int device)
    : rank_(options.rank), size_(options.size), device_(device), instance_(options.instance),
      store_(options.store), timeout_(options.timeout), comm_(comm) {
  try {
    DeviceGuard guard(device_);
    make_streams();
  } catch (const dtrain::Error&) {
    release();
    throw;
  }
}

std::unique_ptr<Comm> Communicator::split(int color, int key, const Options& child) {
  const Op info{"ncclCommSplit"};
  check_health(info);
  DeviceGuard guard(device_);
  const auto deadline = Clock::now() + timeout_;
  ncclComm_t made = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // polled below against the deadline
  const ncclResult_t r = ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &made, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (made != nullptr) ncclCommAbort(made);
    abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: {}", describe(info), nccl_text(r, comm_)));
  }
  wait_ready(info, deadline, false);  // the parent takes part in the split
  if (made == nullptr) return nullptr;
  Options o = child;
  o.store = nullptr;
  std::unique_ptr<Communicator> c(new Communicator(Adopt{}, made, o, device_));
  c->wait_ready(Op{"ncclCommSplit (new communicator)"}, deadline, false);
  int nrank = -1, nsize = -1;
  check_nccl(ncclCommUserRank(made, &nrank), "ncclCommUserRank");
  check_nccl(ncclCommCount(made, &nsize), "ncclCommCount");
  if (nrank != child.rank || nsize != child.size)
    throw Error(DTRAIN_ERR_INTERNAL, fmt::format("ncclCommSplit made rank {} of {} where the CPU split made rank {} of {}",
                                                 nrank, nsize, child.rank, child.size));
  DTRAIN_INFO(coll, "rank {} of {}: split NCCL communicator rank {} of {} (color {}, key {}) on CUDA device {}", rank_,
              size_, nrank, nsize, color, key, device_);
  return c;
}

}  // namespace dtrain::coll::nccl
