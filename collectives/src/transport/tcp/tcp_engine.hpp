#pragma once
// TCP engine: a full mesh of sockets between the ranks of a communicator, set up through the store
// (each rank listens on its advertised address and publishes host:port; a rank connects to every
// lower rank and accepts every higher one). Algorithms run on a group (sorted global ranks that
// include this one): the flat world, or the node leaders in a hierarchical communicator.
//   allreduce: recursive doubling (fold for non powers of two) up to 64 KiB, else a ring
//              reduce-scatter + allgather in chunks; broadcast: a fingerprint check, then a binomial tree, else a
//              pipelined chain;
//   allgather / reduce_scatter: ring; barrier: recursive doubling of empty messages.
// Every message carries the call's sequence number and fingerprint; a difference fails the call with
// DTRAIN_ERR_MISMATCH. A failing rank records why in the store ("abort") and closes its sockets, so
// the others fail at once and report the root cause.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../../engine.hpp"
#include "dtrain/rendezvous/store.hpp"

namespace dtrain::coll::tcp {

struct Options {
  int rank = 0;
  int size = 1;
  rdzv::Store* store = nullptr;
  std::string key_prefix;          // store keys of this communicator
  std::string advertise_host;      // address to listen on and advertise
  std::chrono::milliseconds timeout{300000};
  std::size_t chunk_bytes = 1 << 20;
};

class Engine {
 public:
  explicit Engine(const Options& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  using Group = std::vector<int>;

  void barrier(const OpDesc& d, const Group& g);
  // In place on buf (count elements of dtype, never float16/bfloat16: callers widen those);
  // avg_divisor > 1 divides the result.
  void allreduce(const OpDesc& d, const Group& g, void* buf, std::size_t count, dtrain_dtype_t dtype,
                 dtrain_op_t op, int avg_divisor);
  void broadcast(const OpDesc& d, const Group& g, void* buf, std::size_t bytes, int root_index);
  // buf holds g.size() blocks of block_bytes; this rank's block is already in place.
  void allgather(const OpDesc& d, const Group& g, void* buf, std::size_t block_bytes);
  // buf (g.size() blocks of block_count, scratch: modified) -> out (this rank's block, reduced).
  void reduce_scatter(const OpDesc& d, const Group& g, void* buf, void* out, std::size_t block_count,
                      dtrain_dtype_t dtype, dtrain_op_t op, int avg_divisor);

  // Publishes the failure to the store and closes every socket so peers stop waiting.
  void abort(dtrain_status_t status, const std::string& msg) noexcept;

 private:
  struct Peer {
    int fd = -1;
    std::string host;  // advertised name or address
    std::string addr;  // numeric address
    int port = 0;
  };
  struct Xfer;

  void connect_all();
  // Sends slen bytes to rank `to` and receives rlen bytes from rank `from` concurrently (either may
  // be -1). Every message is preceded by a header with seq + fingerprint + length.
  void exchange(const OpDesc& d, int to, const void* sbuf, std::size_t slen, int from, void* rbuf,
                std::size_t rlen);
  [[noreturn]] void peer_failed(const OpDesc& d, int peer, const std::string& what);
  [[noreturn]] void fail_timeout(const OpDesc& d, int to, int from);
  std::string peer_text(int r) const;
  void ring_reduce_scatter(const OpDesc& d, const Group& g, int idx, std::uint8_t* buf,
                           const std::vector<std::size_t>& starts, std::size_t esz, dtrain_dtype_t dtype,
                           dtrain_op_t op, int avg_divisor);
  void ring_allgather(const OpDesc& d, const Group& g, int idx, std::uint8_t* buf,
                      const std::vector<std::size_t>& starts, std::size_t esz);
  std::uint8_t* scratch(std::size_t bytes);

  int rank_;
  int size_;
  rdzv::Store* store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::size_t chunk_bytes_;
  int listen_fd_ = -1;
  std::vector<Peer> peers_;
  std::vector<std::uint8_t> scratch_;
  bool aborted_ = false;
};

}  // namespace dtrain::coll::tcp
