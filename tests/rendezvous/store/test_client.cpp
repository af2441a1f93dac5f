// TcpStore against a real server over loopback: every operation, blocking, atomicity, scoping, auth.
#include <doctest/doctest.h>

#include <netdb.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "helpers.hpp"

using namespace rt;
using namespace dtrain::rdzv;
using dtrain::AuthError;
using dtrain::ConfigError;
using dtrain::IoError;
using dtrain::TimeoutError;

namespace {

// What this host's resolver says of `name`: 0, or getaddrinfo's error.
int resolver_answer(const std::string& name) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int g = ::getaddrinfo(name.c_str(), "29400", &hints, &res);
  if (res != nullptr) ::freeaddrinfo(res);
  return g;
}

}  // namespace

TEST_SUITE("rendezvous::client") {
  TEST_CASE("every store operation") {
    TestServer srv;
    auto s = srv.connect();
    CHECK(s->local_address() == "127.0.0.1");

    SUBCASE("set and get a 128-byte binary value byte-exact") {
      Bytes id(128);
      for (std::size_t i = 0; i < id.size(); ++i) id[i] = std::uint8_t(i * 7 + 3);
      id[5] = 0;
      id[6] = 0xff;
      s->set("nccl/id", id);
      CHECK(s->get("nccl/id", 1s) == id);
      auto other = srv.connect();
      CHECK(other->get("nccl/id", 1s) == id);
    }
    SUBCASE("add counts from missing, returns the new value") {
      CHECK(s->add("ctr", 5) == 5);
      CHECK(s->add("ctr", -2) == 3);
      CHECK(to_string(s->get("ctr", 1s)) == "3");
    }
    SUBCASE("compare_set") {
      CHECK(to_string(s->compare_set("cas", as_bytes(""), as_bytes("a"))) == "a");
      CHECK(to_string(s->compare_set("cas", as_bytes("x"), as_bytes("b"))) == "a");
      CHECK(to_string(s->compare_set("cas", as_bytes("a"), as_bytes("b"))) == "b");
    }
    SUBCASE("check and erase") {
      std::vector<std::string> keys{"k1", "k2"};
      CHECK_FALSE(s->check(keys));
      s->set("k1", as_bytes("1"));
      CHECK_FALSE(s->check(keys));
      s->set("k2", as_bytes(""));
      CHECK(s->check(keys));
      CHECK(s->erase("k1"));
      CHECK_FALSE(s->erase("k1"));
      CHECK_FALSE(s->check(keys));
    }
    SUBCASE("get times out naming the key") {
      CHECK_THROWS_WITH_AS(s->get("never", 200ms), doctest::Contains("never"), TimeoutError);
      // the connection still works afterwards
      s->set("after", as_bytes("ok"));
      CHECK(to_string(s->get("after", 1s)) == "ok");
    }
  }

  TEST_CASE("a blocking get wakes when another client sets the key") {
    ParkTrace trace;
    TestServer srv;
    auto waiter = srv.connect();
    auto setter = srv.connect();
    std::string got;
    std::thread t([&] { got = to_string(waiter->get("late", 20s)); });
    CHECK(trace.parked("GET 'late'"));  // the set wakes it, not finds it first
    setter->set("late", as_bytes("here"));
    t.join();
    CHECK(got == "here");
  }

  TEST_CASE("add is atomic across clients") {
    TestServer srv;
    constexpr int kThreads = 6, kEach = 200;
    std::vector<std::thread> ts;
    std::vector<std::int64_t> last(kThreads);
    for (int i = 0; i < kThreads; ++i)
      ts.emplace_back([&, i] {
        auto s = srv.connect();
        for (int k = 0; k < kEach; ++k) last[std::size_t(i)] = s->add("counter", 1);
      });
    for (auto& t : ts) t.join();
    auto s = srv.connect();
    CHECK(s->add("counter", 0) == kThreads * kEach);
  }

  TEST_CASE("barrier releases everyone, and times out naming the count") {
    TestServer srv;
    constexpr int kN = 5;
    std::atomic<int> passed{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < kN; ++i)
      ts.emplace_back([&] {
        auto s = srv.connect();
        s->barrier("b", kN, 20s);
        ++passed;
      });
    for (auto& t : ts) t.join();
    CHECK(passed == kN);
    auto s = srv.connect();
    CHECK_THROWS_WITH_AS(s->barrier("lonely", 3, 200ms), doctest::Contains("1 of 3 arrived"), TimeoutError);
  }

  TEST_CASE("keys are scoped by run id and generation") {
    TestServer srv;
    auto g0 = srv.connect("run1", 0);
    g0->set("nccl/id", as_bytes("old"));
    auto g1 = srv.connect("run1", 1);
    CHECK_THROWS_AS(g1->get("nccl/id", 100ms), TimeoutError);
    CHECK_FALSE(g1->check(std::vector<std::string>{"nccl/id"}));
    g1->set("nccl/id", as_bytes("new"));
    CHECK(to_string(g0->get("nccl/id", 1s)) == "old");
    auto other = srv.connect("run2", 0);
    CHECK_THROWS_AS(other->get("nccl/id", 100ms), TimeoutError);
  }

  TEST_CASE("client-side limits") {
    TestServer srv;
    auto s = srv.connect();
    CHECK_THROWS_WITH_AS(s->set(std::string(wire::kMaxKey + 1, 'k'), as_bytes("v")), doctest::Contains("limit"),
                         ConfigError);
    CHECK_THROWS_WITH_AS(s->set("k", Bytes(wire::kMaxValue + 1)), doctest::Contains("limit"), ConfigError);
    s->set("k", Bytes(wire::kMaxValue, 7));  // exactly the limit passes
    CHECK(s->get("k", 1s).size() == wire::kMaxValue);
  }

  TEST_CASE("authentication") {
    ServerOptions o;
    o.token = "s3cret-token-0123456789abcdef";
    o.run_id = "job42";
    TestServer srv(o);
    SUBCASE("the right token and run id") {
      auto s = srv.connect("job42", 0, "s3cret-token-0123456789abcdef");
      s->set("a", as_bytes("b"));
      CHECK(to_string(s->get("a", 1s)) == "b");
    }
    SUBCASE("a wrong token is refused with a reason") {
      CHECK_THROWS_WITH_AS(srv.connect("job42", 0, "wrong"), doctest::Contains("token mismatch"), AuthError);
    }
    SUBCASE("no token against a tokened server") {
      CHECK_THROWS_WITH_AS(srv.connect("job42", 0, ""), doctest::Contains("requires the shared token"), AuthError);
    }
    SUBCASE("a wrong run id") {
      CHECK_THROWS_WITH_AS(srv.connect("job43", 0, "s3cret-token-0123456789abcdef"), doctest::Contains("wrong run id"), AuthError);
    }
    SUBCASE("a server that cannot prove the token is not trusted") {
      TestServer plain;  // no token
      CHECK_THROWS_WITH_AS(plain.connect("job42", 0, "s3cret-token-0123456789abcdef"), doctest::Contains("does not use a token"),
                           AuthError);
    }
  }

  TEST_CASE("connecting to nothing fails with a clear message within the timeout") {
    int port;
    {
      TestServer srv;
      port = srv.port();
    }
    ClientOptions c;
    c.host = "127.0.0.1";
    c.port = port;
    c.connect_timeout = 300ms;
    CHECK_THROWS_WITH_AS(connect_store(c), doctest::Contains("cannot reach the rendezvous"), IoError);
  }

  TEST_CASE("a host name that does not resolve is named as such; one the resolver does not know fails soon") {
    const std::string host = "dtrain-no-such-host.invalid";  // RFC 2606: never resolves
    ClientOptions c;
    c.host = host;
    c.port = 29400;
    c.connect_timeout = 3s;
    c.resolve_grace = 500ms;
    std::string why;
    c.on_retry = [&](std::chrono::milliseconds, const std::string& w) { why = w; };
    const int answer = resolver_answer(host);
    const auto t0 = std::chrono::steady_clock::now();
    if (answer == EAI_NONAME || answer == EAI_FAIL) {
      c.connect_timeout = 60s;
      CHECK_THROWS_WITH_AS(connect_store(c), doctest::Contains(("the name '" + host + "' does not resolve: ").c_str()),
                           ConfigError);
      CHECK(std::chrono::steady_clock::now() - t0 < 20s);
      CHECK(why.find(fmt::format("the name '{}' does not resolve: ", host)) != std::string::npos);
    } else {  // no resolver answers here: a temporary failure, tried until the connect timeout
      CAPTURE(answer);
      CHECK_THROWS_WITH_AS(connect_store(c), doctest::Contains("does not resolve (yet)"), IoError);
    }
  }

  TEST_CASE("a client sees the server going away as IoError") {
    ParkTrace trace;
    auto srv = std::make_unique<TestServer>();
    auto s = srv->connect();
    std::thread t([&] {
      CHECK(trace.parked("GET 'x'"));  // the server goes away under a parked get
      srv->server->stop();
    });
    CHECK_THROWS_AS(s->get("x", 20s), IoError);
    t.join();
  }

  TEST_CASE("a Canceller abandons connect_store: retries, a silent host's handshake; not a connected store") {
    auto cancel = std::make_shared<Canceller>();
    // connect_store(c) with the canceller raised by another thread once `connecting()` says the
    // connect is under way: Cancelled, long before any timeout
    auto cancelled_while = [&](ClientOptions c, const std::function<bool()>& connecting) {
      c.cancel = cancel;
      auto t0 = std::chrono::steady_clock::now();
      std::thread t([&] {
        CHECK(wait_until(connecting));
        cancel->raise();
      });
      CHECK_THROWS_AS(connect_store(c), Cancelled);
      t.join();
      CHECK(std::chrono::steady_clock::now() - t0 < 5s);
    };
    SUBCASE("raised before: at once") {
      TestServer srv;
      ClientOptions c = srv.client();
      cancel->raise();
      c.cancel = cancel;
      CHECK_THROWS_WITH_AS(connect_store(c), doctest::Contains("connect cancelled"), Cancelled);
    }
    SUBCASE("raised while retrying a refused connection") {
      ClientOptions c;
      c.host = "127.0.0.1";
      c.port = dtrain::net::pick_free_port("127.0.0.1");
      c.connect_timeout = 20s;
      std::atomic<bool> retried{false};
      c.on_retry = [&](std::chrono::milliseconds, const std::string&) { retried = true; };
      cancelled_while(c, [&] { return retried.load(); });
    }
    SUBCASE("raised while a listener never answers the handshake") {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
      REQUIRE(::listen(fd, 4) == 0);
      socklen_t len = sizeof a;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      ClientOptions c;
      c.host = "127.0.0.1";
      c.port = ntohs(a.sin_port);
      cancelled_while(c, [&] {  // connected (the listener's queue holds it): waiting for the challenge
        pollfd p{fd, POLLIN, 0};
        return ::poll(&p, 1, 0) == 1;
      });
      ::close(fd);
    }
    SUBCASE("raised after the connect: the store keeps working") {
      TestServer srv;
      ClientOptions c = srv.client();
      c.cancel = cancel;
      auto s = connect_store(c);
      cancel->raise();
      s->set("k", as_bytes("v"));
      CHECK(to_string(s->get("k", 1s)) == "v");
    }
  }

  TEST_CASE("a connection the server closes during the handshake is made again; a stranger's reply is not") {
    // A listener that takes the first connection, reads its hello and closes it (what a flooded
    // server does to connections in the handshake), then makes way for a real server on its port.
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    REQUIRE(::listen(lfd, 8) == 0);
    int port = ntohs(a.sin_port);
    SUBCASE("cut off, then a real server") {
      std::unique_ptr<TestServer> real;
      std::thread cutter([&] {
        int c = ::accept(lfd, nullptr, nullptr);
        char buf[256];
        (void)::recv(c, buf, sizeof buf, 0);
        ::close(c);
        ::close(lfd);
        ServerOptions o;
        o.port = port;
        real = std::make_unique<TestServer>(o);
      });
      ClientOptions c;
      c.host = "127.0.0.1";
      c.port = port;
      c.run_id = "r";
      c.connect_timeout = 10s;
      auto s = connect_store(c);
      cutter.join();
      s->set("k", as_bytes("v"));
      CHECK(to_string(s->get("k", 1s)) == "v");
    }
    SUBCASE("a peer that does not speak the protocol fails at once") {
      std::thread stranger([&] {
        int c = ::accept(lfd, nullptr, nullptr);
        const char reply[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
        (void)::send(c, reply, sizeof reply - 1, MSG_NOSIGNAL);
        ::close(c);
      });
      ClientOptions c;
      c.host = "127.0.0.1";
      c.port = port;
      c.connect_timeout = 30s;
      auto t0 = std::chrono::steady_clock::now();
      CHECK_THROWS_WITH_AS(connect_store(c), doctest::Contains("bad reply"), IoError);
      CHECK(std::chrono::steady_clock::now() - t0 < 5s);
      stranger.join();
      ::close(lfd);
    }
  }
}
