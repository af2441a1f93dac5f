// Header-only C++ wrapper over the C ABI of libdtrain_collectives: an RAII communicator, std::span
// overloads with the dtype deduced from the element type, and exceptions (dtrain::coll_error with
// the status and dtrain_last_error() text) instead of status codes.
//
//   dtrain::Communicator comm;                      // from the environment `dtrain launch` sets
//   std::vector<float> grad(n);
//   comm.allreduce(std::span<float>(grad));         // in place, sum
//   comm.allreduce(std::span<const float>(a), std::span<float>(b), DTRAIN_AVG);
//
//   auto pipe = dtrain::Communicator::group(DTRAIN_GROUP_PIPELINE);  // this rank's pipeline stages
//   int next = pipe.rank() + 1 < pipe.size() ? pipe.rank() + 1 : dtrain::proc_null;
//   pipe.sendrecv(std::span<const double>(act), next, std::span<double>(grad), next);  // 1F1B step
//   auto halves = comm.split(comm.rank() % 2, comm.rank());          // MPI_Comm_split
//
//   dtrain_config_t cfg = DTRAIN_CONFIG_INITIALIZER;  // since 0.3: through a framework's own store
//   cfg.rank = r; cfg.size = n; cfg.store = &my_store;
//   dtrain::Communicator group(cfg);
//   dtrain_op_t scaled = group.premul_sum(1.0 / n);   // sum of x / n
//   group.allreduce(std::span<float>(grad), scaled);
//   group.alltoall(std::span<const int>(out), std::span<int>(in));
//   int from = group.recv_any(std::span<double>(msg), /*tag=*/3);
#ifndef DTRAIN_COLLECTIVES_HPP
#define DTRAIN_COLLECTIVES_HPP

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "dtrain/collectives.h"

namespace dtrain {

class coll_error : public std::runtime_error {
 public:
  coll_error(dtrain_status_t status, const std::string& what) : std::runtime_error(what), status_(status) {}
  dtrain_status_t status() const noexcept { return status_; }

 private:
  dtrain_status_t status_;
};

inline void check(dtrain_status_t st) {
  if (st != DTRAIN_SUCCESS)
    throw coll_error(st, std::string(dtrain_status_string(st)) + ": " + dtrain_last_error());
}

// Element type -> dtype. float16/bfloat16 storage: use dtrain::half16 / dtrain::bfloat16 tags
// (two-byte structs) or the raw-pointer overloads with an explicit dtype.
struct half16 {
  std::uint16_t bits;
};
struct bfloat16 {
  std::uint16_t bits;
};
template <class T>
constexpr dtrain_dtype_t dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, std::int8_t>) return DTRAIN_INT8;
  else if constexpr (std::is_same_v<U, std::uint8_t>) return DTRAIN_UINT8;
  else if constexpr (std::is_same_v<U, std::int32_t>) return DTRAIN_INT32;
  else if constexpr (std::is_same_v<U, std::int64_t>) return DTRAIN_INT64;
  else if constexpr (std::is_same_v<U, half16>) return DTRAIN_FLOAT16;
  else if constexpr (std::is_same_v<U, bfloat16>) return DTRAIN_BFLOAT16;
  else if constexpr (std::is_same_v<U, float>) return DTRAIN_FLOAT32;
  else if constexpr (std::is_same_v<U, double>) return DTRAIN_FLOAT64;
  else if constexpr (std::is_same_v<U, bool> && sizeof(bool) == 1) return DTRAIN_BOOL;
  else if constexpr (std::is_same_v<U, std::int16_t>) return DTRAIN_INT16;
  else static_assert(sizeof(T) == 0, "dtrain: unsupported element type");
}

// A peer that skips one direction of sendrecv (DTRAIN_PROC_NULL).
inline constexpr int proc_null = DTRAIN_PROC_NULL;

class Communicator {
 public:
  // From the environment (RANK, WORLD_SIZE, DTRAIN_STORE_ADDR, ... as `dtrain launch` sets them).
  Communicator() { check(dtrain_comm_init_from_env(&comm_)); }
  explicit Communicator(const dtrain_init_options_t& options) { check(dtrain_comm_init(&options, &comm_)); }
  // Since 0.3: through the caller's store (dtrain_comm_init_config; start from DTRAIN_CONFIG_INITIALIZER).
  explicit Communicator(const dtrain_config_t& config) { check(dtrain_comm_init_config(&config, &comm_)); }
  // Takes ownership of a handle from the C ABI (NULL gives an empty communicator).
  static Communicator adopt(dtrain_comm_t comm) noexcept { return Communicator(comm, Adopt{}); }
  // This rank's tensor, pipeline or data group from the layout `dtrain launch` puts in the
  // environment (collective over the world: every rank asks for the same kinds in the same order).
  static Communicator group(dtrain_group_kind_t kind) {
    dtrain_comm_t c = nullptr;
    check(dtrain_comm_init_group_from_env(kind, &c));
    return adopt(c);
  }
  ~Communicator() {
    if (comm_ != nullptr) dtrain_comm_destroy(comm_);
  }
  Communicator(Communicator&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    if (this != &o) {
      if (comm_ != nullptr) dtrain_comm_destroy(comm_);
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  dtrain_comm_t get() const noexcept { return comm_; }
  // False for an empty communicator (moved from, or split with a negative color).
  explicit operator bool() const noexcept { return comm_ != nullptr; }
  int rank() const {
    int r = 0;
    check(dtrain_comm_rank(comm_, &r));
    return r;
  }
  int size() const {
    int s = 0;
    check(dtrain_comm_size(comm_, &s));
    return s;
  }

  // Raw forms (host buffers, or device buffers with a cudaStream_t as stream).
  void allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op = DTRAIN_SUM,
                 void* stream = nullptr) {
    check(dtrain_allreduce(comm_, send, recv, count, dtype, op, stream));
  }
  void broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root,
                 void* stream = nullptr) {
    check(dtrain_broadcast(comm_, send, recv, count, dtype, root, stream));
  }
  void allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, void* stream = nullptr) {
    check(dtrain_allgather(comm_, send, recv, sendcount, dtype, stream));
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                      dtrain_op_t op = DTRAIN_SUM, void* stream = nullptr) {
    check(dtrain_reduce_scatter(comm_, send, recv, recvcount, dtype, op, stream));
  }
  void barrier() { check(dtrain_barrier(comm_)); }

  // Since 0.3. The deadline of later calls (<= 0: the one the communicator was made with).
  void set_timeout(double seconds) { check(dtrain_comm_set_timeout(comm_, seconds)); }
  // A premultiplied-sum op of this communicator (every rank creates its ops in the same order);
  // destroy_op frees it.
  dtrain_op_t premul_sum(double scale) {
    dtrain_op_t op{};
    check(dtrain_redop_create_premul_sum(comm_, scale, &op));
    return op;
  }
  void destroy_op(dtrain_op_t op) { check(dtrain_redop_destroy(comm_, op)); }
  void reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root,
              void* stream = nullptr) {
    check(dtrain_reduce(comm_, send, recv, count, dtype, op, root, stream));
  }
  void gather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int root,
              void* stream = nullptr) {
    check(dtrain_gather(comm_, send, recv, sendcount, dtype, root, stream));
  }
  void scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int root,
               void* stream = nullptr) {
    check(dtrain_scatter(comm_, send, recv, recvcount, dtype, root, stream));
  }
  void alltoall(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, void* stream = nullptr) {
    check(dtrain_alltoall(comm_, send, recv, count, dtype, stream));
  }
  void alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                 const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype,
                 void* stream = nullptr) {
    check(dtrain_alltoallv(comm_, send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype, stream));
  }
  // Returns the rank the message came from.
  int recv_any(void* buf, std::size_t count, dtrain_dtype_t dtype, int tag = 0) {
    int source = -1;
    check(dtrain_recv_any(comm_, buf, count, dtype, tag, &source, nullptr));
    return source;
  }

  // MPI_Comm_split (collective): ranks of one color >= 0 form a new communicator ordered by key,
  // ties by rank; DTRAIN_UNDEFINED gives an empty one.
  Communicator split(int color, int key) const {
    dtrain_comm_t c = nullptr;
    check(dtrain_comm_split(comm_, color, key, &c));
    return adopt(c);
  }

  // Point-to-point, raw forms. Messages between two ranks match in order (tag, count and dtype must
  // agree); see dtrain-collectives(3) for what may deadlock.
  void send(const void* buf, std::size_t count, dtrain_dtype_t dtype, int peer, int tag = 0, void* stream = nullptr) {
    check(dtrain_send(comm_, buf, count, dtype, peer, tag, stream));
  }
  void recv(void* buf, std::size_t count, dtrain_dtype_t dtype, int peer, int tag = 0, void* stream = nullptr) {
    check(dtrain_recv(comm_, buf, count, dtype, peer, tag, stream));
  }
  void sendrecv(const void* sendbuf, std::size_t sendcount, dtrain_dtype_t senddtype, int dest, int sendtag,
                void* recvbuf, std::size_t recvcount, dtrain_dtype_t recvdtype, int source, int recvtag,
                void* stream = nullptr) {
    check(dtrain_sendrecv(comm_, sendbuf, sendcount, senddtype, dest, sendtag, recvbuf, recvcount, recvdtype, source,
                          recvtag, stream));
  }

  // Span forms: the dtype comes from T.
  template <class T>
  void allreduce(std::span<T> inout, dtrain_op_t op = DTRAIN_SUM) {
    allreduce(inout.data(), inout.data(), inout.size(), dtype_of<T>(), op);
  }
  template <class T>
  void allreduce(std::span<const T> send, std::span<T> recv, dtrain_op_t op = DTRAIN_SUM) {
    if (send.size() != recv.size()) throw coll_error(DTRAIN_ERR_INVALID_ARGUMENT, "allreduce: span sizes differ");
    allreduce(send.data(), recv.data(), recv.size(), dtype_of<T>(), op);
  }
  template <class T>
  void broadcast(std::span<T> inout, int root) {
    broadcast(inout.data(), inout.data(), inout.size(), dtype_of<T>(), root);
  }
  // recv.size() must be size() * send.size().
  template <class T>
  void allgather(std::span<const T> send, std::span<T> recv) {
    if (recv.size() != send.size() * static_cast<std::size_t>(size()))
      throw coll_error(DTRAIN_ERR_INVALID_ARGUMENT, "allgather: recv must hold size() * send.size() elements");
    allgather(send.data(), recv.data(), send.size(), dtype_of<T>());
  }
  // send.size() must be size() * recv.size().
  template <class T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, dtrain_op_t op = DTRAIN_SUM) {
    if (send.size() != recv.size() * static_cast<std::size_t>(size()))
      throw coll_error(DTRAIN_ERR_INVALID_ARGUMENT, "reduce_scatter: send must hold size() * recv.size() elements");
    reduce_scatter(send.data(), recv.data(), recv.size(), dtype_of<T>(), op);
  }
  // Since 0.3. reduce: recv is used on the root only (an empty span elsewhere).
  template <class T>
  void reduce(std::span<const T> send, std::span<T> recv, int root, dtrain_op_t op = DTRAIN_SUM) {
    if (rank() == root && recv.size() != send.size())
      throw coll_error(DTRAIN_ERR_INVALID_ARGUMENT, "reduce: span sizes differ at the root");
    reduce(send.data(), recv.data(), send.size(), dtype_of<T>(), op, root);
  }
  // gather: recv (root only) holds size() * send.size() elements.
  template <class T>
  void gather(std::span<const T> send, std::span<T> recv, int root) {
    if (rank() == root && recv.size() != send.size() * static_cast<std::size_t>(size()))
      throw coll_error(DTRAIN_ERR_INVALID_ARGUMENT, "gather: recv must hold size() * send.size() elements at the root");
    gather(send.data(), recv.data(), send.size(), dtype_of<T>(), root);
  }
  // scatter: send (root only) holds size() * recv.size() elements.
  template <class T>
  void scatter(std::span<const T> send, std::span<T> recv, int root) {
    if (rank() == root && send.size() != recv.size() * static_cast<std::size_t>(size()))
      throw coll_error(DTRAIN_ERR_INVALID_ARGUMENT, "scatter: send must hold size() * recv.size() elements at the root");
    scatter(send.data(), recv.data(), recv.size(), dtype_of<T>(), root);
  }
  // alltoall: both hold size() blocks of equal length.
  template <class T>
  void alltoall(std::span<const T> send, std::span<T> recv) {
    const auto n = static_cast<std::size_t>(size());
    if (send.size() != recv.size() || send.size() % n != 0)
      throw coll_error(DTRAIN_ERR_INVALID_ARGUMENT, "alltoall: send and recv must hold size() equal blocks");
    alltoall(send.data(), recv.data(), send.size() / n, dtype_of<T>());
  }
  template <class T>
  int recv_any(std::span<T> buf, int tag = 0) {
    static_assert(!std::is_const_v<T>, "dtrain: recv_any needs a writable span");
    return recv_any(buf.data(), buf.size(), dtype_of<T>(), tag);
  }

  template <class T>
  void send(std::span<T> buf, int peer, int tag = 0) {
    send(buf.data(), buf.size(), dtype_of<T>(), peer, tag);
  }
  template <class T>
  void recv(std::span<T> buf, int peer, int tag = 0) {
    static_assert(!std::is_const_v<T>, "dtrain: recv needs a writable span");
    recv(buf.data(), buf.size(), dtype_of<T>(), peer, tag);
  }
  // Sends `send` to dest while receiving `recv` from source (either may be proc_null), one tag.
  template <class T, class U>
  void sendrecv(std::span<T> send, int dest, std::span<U> recv, int source, int tag = 0) {
    static_assert(!std::is_const_v<U>, "dtrain: sendrecv needs a writable receive span");
    sendrecv(send.data(), send.size(), dtype_of<T>(), dest, tag, recv.data(), recv.size(), dtype_of<U>(), source, tag);
  }

 private:
  struct Adopt {};
  Communicator(dtrain_comm_t comm, Adopt) noexcept : comm_(comm) {}

  dtrain_comm_t comm_ = nullptr;
};

}  // namespace dtrain

#endif  // DTRAIN_COLLECTIVES_HPP
