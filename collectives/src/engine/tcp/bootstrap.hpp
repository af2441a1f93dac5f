#pragma once
// How a group's sockets come to be: each rank listens on its advertised address and publishes
// "address port host" under <key_prefix>tcp/<rank> (rank 0 first puts 32 random bytes, the
// communicator's secret, under <key_prefix>tcp/secret); it connects to every lower rank (retrying
// while it is not listening yet) and accepts every higher one, each connection proving the secret
// (handshake.hpp) before it is bound to a rank. A connection that does not prove it (a stranger:
// garbage, a wrong proof, silence past kHandshakeTimeout, an early close) is dropped with a warning
// naming its address, and the listener goes on accepting until every real peer is in, then closes.
// Bounded by the timeout (for real peers only); every failure names the peer's rank, host, address
// and port.
#include <chrono>
#include <string>
#include <vector>

#include "../../call.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "links.hpp"

namespace dtrain::coll::tcp {

// The address a rank listens on when none is configured: DTRAIN_SOCKET_ADDR, DTRAIN_LOCAL_ADDR, the
// local address of the store connection (the interface that reaches the store), else 127.0.0.1.
std::string resolve_advertise_host(const std::string& configured, rdzv::Store* store);

class Bootstrap {
 public:
  explicit Bootstrap(const Options& options);  // listens and publishes the address; throws CollError
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // Connects to every lower rank and accepts every higher one; the listener is closed after.
  Links connect();

 private:
  struct Incoming;
  enum class Greet { ok, io, refused };

  void listen_on(const std::string& host);
  void read_addresses();
  void connect_lower(Clock::time_point deadline);
  Greet greet(int fd, int r, Clock::time_point deadline, std::string& why);
  void accept_higher(Clock::time_point deadline);
  void accept_new(std::vector<Incoming>& in);
  bool advance(Incoming& c);
  void drop(Incoming& c, const std::string& why);

  Options o_;
  Links links_;
  int listen_fd_ = -1;
  rdzv::Bytes secret_;  // the communicator's, from the store (handshake::kSecretBytes)
};

}  // namespace dtrain::coll::tcp
