#pragma once
// A real etcd for a test: /usr/bin/etcd (the path CMake found, ETCD_BIN) started on free loopback
// ports with a data dir of its own under /tmp, ready once /health answers; killed and its dir
// removed when the object goes. With tls, the client URL is https and the dir holds a CA, a server
// certificate for IP 127.0.0.1 and a client certificate made with the openssl CLI (etcd then asks
// for a client certificate signed by that CA). The etcd process dies with the thread that started
// it (PR_SET_PDEATHSIG), so a crashed test leaves none behind: start it from the test's thread.
//
// Where etcd cannot start, ok() is false and error() says why; tests REQUIRE_ETCD(server), which
// fails with that reason. Whether etcd is installed at all is the program's need "etcd"
// (tests/test_needs.hpp), checked before any case runs: only there can an etcd test skip.
#include <doctest/doctest.h>

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "client.hpp"

namespace etcdtest {

struct EtcdServerOptions {
  bool tls = false;                     // https, client certificates required
  std::vector<std::string> extra_args;  // more etcd flags, e.g. "--auth-token-ttl=1"
};

class EtcdServer {
 public:
  explicit EtcdServer(EtcdServerOptions o = {});
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  std::string endpoint() const;  // "127.0.0.1:PORT"
  std::string url() const;       // "http://127.0.0.1:PORT" or "https://..."
  // Client options that reach this etcd: the url, and with tls the CA and the client certificate.
  dtrain::etcd::Options options() const;
  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return dir_ + "/ca.crt"; }
  std::string cert_file() const { return dir_ + "/client.crt"; }
  std::string key_file() const { return dir_ + "/client.key"; }
  // A CA of its own that signed nothing etcd uses (for "wrong CA" tests); its certificate's path.
  std::string other_ca();

  // Adds user root with `password` (role root) and turns etcd's authentication on; REQUIREs success.
  void enable_auth(const std::string& password);
  // etcdctl against this etcd (TLS files and, once auth is on, root's password added) with `args`;
  // its exit status, its output in *out.
  int etcdctl(const std::string& args, std::string* out = nullptr) const;

  void kill();     // SIGKILL, as if its host died; the data dir stays
  bool restart();  // starts it again on the same ports and data; false (with error()) if it fails
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  std::string log_tail(std::size_t bytes = 2000) const;  // the end of etcd's output

 private:
  bool make_certificates();
  bool start();
  bool wait_healthy();
  std::vector<std::string> args() const;

  EtcdServerOptions opts_;
  std::string dir_, error_, root_password_;
  int client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
};

// The etcd shared by the tests that need nothing special (started on first use, stopped at exit);
// give each test a key prefix of its own (unique_prefix()).
EtcdServer& shared_etcd();
// "/t/<n>/": a prefix no other test in this process uses.
std::string unique_prefix();

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace etcdtest

// Fails the test case, with the reason, when the server did not start.
#define REQUIRE_ETCD(server) REQUIRE_MESSAGE((server).ok(), (server).error())
