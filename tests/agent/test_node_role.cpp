// Serve or join the rendezvous: the decision alone, then with real binds on loopback.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "dtrain/common/net.hpp"
#include "node_role.hpp"

using namespace dtrain::agent;
namespace net = dtrain::net;

namespace {

NodeConfig loopback(int port, int node_rank) {
  NodeConfig c;
  c.endpoint = net::endpoint_text("127.0.0.1", port);
  c.ep = {"127.0.0.1", port};
  c.token = "0123456789abcdef0123456789abcdef";
  c.run_id = "role-test";
  c.node_rank = node_rank;
  return c;
}

// Holds 127.0.0.1:port listening, as another agent or `dtrain rendezvous serve` would.
struct Listener {
  int fd = -1;
  explicit Listener(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
  }
  ~Listener() { ::close(fd); }
};

}  // namespace

TEST_SUITE("agent::node_role") {

TEST_CASE("node 0, or a node whose rank is not known yet, serves an address that is ours and free") {
  CHECK(choose_role(0, 0) == Role::serve);
  CHECK(choose_role(-1, 0) == Role::serve);
  CHECK(choose_role(1, 0) == Role::join);
  CHECK(choose_role(0, EADDRINUSE) == Role::join);      // a dedicated server runs there
  CHECK(choose_role(-1, EADDRNOTAVAIL) == Role::join);  // another host's address
  CHECK(joins_after_failed_start(EADDRINUSE));
  CHECK_FALSE(joins_after_failed_start(0));
  CHECK_FALSE(joins_after_failed_start(EACCES));
}

TEST_CASE("serving on loopback: node 0 serves a free endpoint and joins a taken one") {
  int port = net::pick_free_port("127.0.0.1");
  SUBCASE("free: node 0 serves exactly that address") {
    auto s = serve_if_ours(loopback(port, 0));
    REQUIRE(s != nullptr);
    CHECK(s->port() == port);
    CHECK(net::bind_probe("127.0.0.1", port) == EADDRINUSE);
    s->stop();
  }
  SUBCASE("free, rank not known: this node serves") {
    auto s = serve_if_ours(loopback(port, -1));
    CHECK(s != nullptr);
  }
  SUBCASE("free, node 1: joins without probing") { CHECK(serve_if_ours(loopback(port, 1)) == nullptr); }
  SUBCASE("taken: node 0 joins") {
    Listener other(port);
    CHECK(serve_if_ours(loopback(port, 0)) == nullptr);
  }
}

}  // TEST_SUITE
