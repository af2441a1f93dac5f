#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"

using namespace dtrain;

TEST_SUITE("common::net") {
  TEST_CASE("host:port parsing") {
    auto hp = net::parse_host_port("10.0.0.1:29400", "--rdzv");
    CHECK(hp.host == "10.0.0.1");
    CHECK(hp.port == 29400);
    auto v6 = net::parse_host_port("[::1]:80", "--rdzv");
    CHECK(v6.host == "::1");
    SUBCASE("errors name the problem") {
      CHECK_THROWS_WITH_AS(net::parse_host_port("host", "x"), doctest::Contains("not HOST:PORT"), ConfigError);
      CHECK_THROWS_WITH_AS(net::parse_host_port("h:70000", "x"), doctest::Contains("out of range"), ConfigError);
      CHECK_THROWS_WITH_AS(net::parse_host_port("h:abc", "x"), doctest::Contains("not a number"), ConfigError);
      CHECK_THROWS_WITH_AS(net::parse_host_port(":80", "x"), doctest::Contains("empty host"), ConfigError);
      CHECK_THROWS_WITH_AS(net::parse_host_port("[::1]80", "x"), doctest::Contains("IPv6 as [addr]:port"), ConfigError);
    }
  }

  TEST_CASE("endpoint text brackets IPv6 and reads socket addresses") {
    CHECK(net::endpoint_text("10.0.0.1", 29400) == "10.0.0.1:29400");
    CHECK(net::endpoint_text("::1", 80) == "[::1]:80");
    sockaddr_storage ss{};
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(1234);
    ::inet_pton(AF_INET, "127.0.0.2", &v4->sin_addr);
    CHECK(net::endpoint_text(ss) == "127.0.0.2:1234");
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(99);
    ::inet_pton(AF_INET6, "::1", &v6->sin6_addr);
    CHECK(net::endpoint_text(ss) == "[::1]:99");
    ss.ss_family = AF_UNIX;
    CHECK(net::endpoint_text(ss) == "?");
  }

  TEST_CASE("pick_free_port gives a port that can be bound; bind_probe sees it taken once bound") {
    for (const char* host : {"127.0.0.1", "::1"}) {
      CAPTURE(host);
      int p = net::pick_free_port(host);
      REQUIRE(p > 0);
      REQUIRE(p < 65536);
      CHECK(net::bind_probe(host, p) == 0);
      sockaddr_storage ss{};
      socklen_t len = 0;
      if (std::string(host) == "::1") {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(static_cast<std::uint16_t>(p));
        ::inet_pton(AF_INET6, host, &a->sin6_addr);
        len = sizeof *a;
      } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(static_cast<std::uint16_t>(p));
        ::inet_pton(AF_INET, host, &a->sin_addr);
        len = sizeof *a;
      }
      int fd = ::socket(ss.ss_family, SOCK_STREAM, 0);
      REQUIRE(fd >= 0);
      REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0);
      REQUIRE(::listen(fd, 1) == 0);
      CHECK(net::bind_probe(host, p) == EADDRINUSE);
      ::close(fd);
    }
    CHECK(net::pick_free_port("0.0.0.0") > 0);
    CHECK_THROWS_AS(net::pick_free_port("192.0.2.1"), IoError);  // not an address of this machine
    CHECK(net::bind_probe("192.0.2.1", 29400) == EADDRNOTAVAIL);
  }

  TEST_CASE("loopback hosts") {
    CHECK(net::is_loopback_host("127.0.0.1"));
    CHECK(net::is_loopback_host("127.5.0.1"));
    CHECK(net::is_loopback_host("::1"));
    CHECK_FALSE(net::is_loopback_host("0.0.0.0"));
    CHECK_FALSE(net::is_loopback_host("10.1.2.3"));
    CHECK_FALSE(net::is_loopback_host("no-such-host.invalid"));
  }
}
