// The etcd client without a working etcd: options it refuses before connecting, an endpoint where
// nothing listens, and one that accepts but never answers.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "client.hpp"
#include "dtrain/common/errors.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// A listening loopback socket that never accepts: connects succeed, requests get no answer.
struct SilentPort {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  SilentPort() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~SilentPort() { ::close(fd); }
};

// A loopback port where nothing listens (bound to find it, then released).
int closed_port() {
  SilentPort p;
  return p.port;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

TEST_SUITE("etcd::client") {
  TEST_CASE("a client refuses a bad endpoint or unreadable TLS files before connecting") {
    auto with = [](std::string ep, std::string ca = {}, std::string cert = {}, std::string key = {}) {
      Options o;
      o.endpoint = std::move(ep);
      o.cacert = std::move(ca);
      o.cert = std::move(cert);
      o.key = std::move(key);
      return o;
    };
    CHECK_THROWS_WITH_AS(Client(with("localhost")), doctest::Contains("expected host:port"), dtrain::ConfigError);
    CHECK_THROWS_AS(Client(with("http://h:0")), dtrain::ConfigError);
    CHECK_THROWS_AS(Client(with("h:2379/v3")), dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(Client(with("h:2379", "/etc/hostname")), doctest::Contains("https://h:2379"), dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(Client(with("https://h:2379", "/nonexistent/ca.pem")), doctest::Contains("/nonexistent/ca.pem"),
                         dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(Client(with("https://h:2379", {}, "/etc/hostname")), doctest::Contains("give both"),
                         dtrain::ConfigError);
    Client ok(with("https://[::1]:2379/"));
    CHECK(ok.endpoint() == "[::1]:2379");
    CHECK(ok.url() == "https://[::1]:2379");
    CHECK(Client(with("10.0.0.1:2379")).url() == "http://10.0.0.1:2379");
  }

  TEST_CASE("no etcd there: IoError naming the endpoint, at once; a silent one: the timeouts hold") {
    Options o;
    o.endpoint = "127.0.0.1:" + std::to_string(closed_port());
    o.connect_timeout = 2000ms;
    o.request_timeout = 500ms;
    Client c(o);
    auto t0 = Clock::now();
    CHECK_THROWS_WITH_AS(c.range("k"), doctest::Contains((o.endpoint + " (/v3/kv/range): cannot connect").c_str()), dtrain::IoError);
    CHECK_THROWS_WITH_AS(Watch(o, "k", "", 0), doctest::Contains("is etcd running there?"), dtrain::IoError);
    CHECK(seconds_since(t0) < 2.0);

    Options unknown = o;
    unknown.endpoint = "dtrain-no-such-host.invalid:2379";  // RFC 2606: never resolves
    CHECK_THROWS_WITH_AS(Client(unknown).range("k"),
                         doctest::Contains("dtrain-no-such-host.invalid:2379 (/v3/kv/range): the host name does not "
                                           "resolve ("),
                         dtrain::IoError);

    SilentPort silent;
    o.endpoint = "127.0.0.1:" + std::to_string(silent.port);
    Client s(o);
    t0 = Clock::now();
    CHECK_THROWS_WITH_AS(s.put("k", "v"), doctest::Contains("no answer within 500 ms"), dtrain::TimeoutError);
    CHECK(seconds_since(t0) < 3.0);
    t0 = Clock::now();
    CHECK_THROWS_WITH_AS(Watch(s, "k", "", 0), doctest::Contains("did not confirm it"), dtrain::TimeoutError);
    CHECK(seconds_since(t0) < 5.0);
  }
}
