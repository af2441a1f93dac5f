// The server under abuse: garbage, oversize, truncated and stalled frames, limits, binding rules.
// Each bad peer must be dropped while a well-behaved client keeps being served.
#include <doctest/doctest.h>

#include <poll.h>

#include <random>
#include <thread>

#include "dtrain/common/errors.hpp"
#include "helpers.hpp"

using namespace rt;
using namespace dtrain::rdzv;
using wire::Frame;
using wire::Op;

namespace {

void good_client_still_works(const TestServer& srv, const std::string& key) {
  auto s = srv.connect();
  Bytes v(128);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::uint8_t(i ^ 0x5a);
  s->set(key, v);
  CHECK(s->get(key, 5s) == v);
}

}  // namespace

TEST_SUITE("rendezvous::server") {
  TEST_CASE("bad peers are dropped, good clients keep being served") {
    ServerOptions o;
    o.frame_timeout = 300ms;
    o.handshake_timeout = 500ms;
    TestServer srv(o);
    auto good = srv.connect();  // connected throughout
    good->set("before", as_bytes("x"));

    SUBCASE("random garbage") {
      std::mt19937 rng(7);
      for (int i = 0; i < 20; ++i) {
        RawConn r(srv.port());
        Bytes junk(64 + rng() % 512);
        for (auto& b : junk) b = std::uint8_t(rng());
        junk[0] = 0xff;  // make sure the length is absurd or the version wrong
        r.send_bytes(junk);
        CHECK(r.closed_within(5s));
      }
    }
    SUBCASE("oversize length announced") {
      RawConn r(srv.port());
      REQUIRE(r.handshake());
      r.send_bytes(Bytes{0x10, 0, 0, 0, wire::kVersion});
      CHECK(r.closed_within(5s));
    }
    SUBCASE("truncated frame then close") {
      RawConn r(srv.port());
      REQUIRE(r.handshake());
      Bytes enc = wire::encode(Frame(Op::set).str("k").bytes(Bytes(100)));
      enc.resize(enc.size() / 2);
      r.send_bytes(enc);
      ::shutdown(r.fd, SHUT_WR);
      CHECK(r.closed_within(5s));
    }
    SUBCASE("stall mid-frame is dropped by the idle timer") {
      RawConn r(srv.port());
      REQUIRE(r.handshake());
      Bytes enc = wire::encode(Frame(Op::set).str("k").bytes(Bytes(100)));
      enc.resize(10);
      r.send_bytes(enc);
      CHECK(r.closed_within(5s));
    }
    SUBCASE("no handshake at all") {
      RawConn r(srv.port());
      CHECK(r.closed_within(5s));
    }
    SUBCASE("a request before the handshake") {
      RawConn r(srv.port());
      r.send_frame(Frame(Op::set).str("k").str("v"));
      CHECK(r.closed_within(5s));
    }
    SUBCASE("a reply frame sent as a request") {
      RawConn r(srv.port());
      REQUIRE(r.handshake());
      r.send_frame(Frame(Op::value).str("v"));
      CHECK(r.closed_within(5s));
    }
    SUBCASE("a request with missing arguments") {
      RawConn r(srv.port());
      REQUIRE(r.handshake());
      r.send_frame(Frame(Op::set));
      CHECK(r.closed_within(5s));
    }
    good_client_still_works(srv, "after");
    CHECK(to_string(good->get("before", 1s)) == "x");
  }

  TEST_CASE("server-side key and value limits answer with an error, connection kept") {
    TestServer srv;
    RawConn r(srv.port());
    REQUIRE(r.handshake());
    r.send_frame(Frame(Op::set).str(std::string(wire::kMaxKey + 1, 'k')).str("v"));
    auto e = r.recv_frame(5s);
    REQUIRE(e);
    CHECK(e->op == Op::error);
    CHECK(e->i64_at(0) == std::int64_t(wire::ErrorCode::limit));
    CHECK(std::string(e->str_at(1)).find("1025") != std::string::npos);
    r.send_frame(Frame(Op::set).str("k").bytes(Bytes(wire::kMaxValue + 1)));
    e = r.recv_frame(5s);
    REQUIRE(e);
    CHECK(e->op == Op::error);
    r.send_frame(Frame(Op::set).str("k").str("v"));
    e = r.recv_frame(5s);
    REQUIRE(e);
    CHECK(e->op == Op::ok);
  }

  TEST_CASE("per-run key and byte limits") {
    ServerOptions o;
    o.max_keys_per_run = 3;
    o.max_bytes_per_run = 1000;
    TestServer srv(o);
    auto s = srv.connect();
    s->set("a", as_bytes("1"));
    s->set("b", as_bytes("1"));
    s->set("c", as_bytes("1"));
    CHECK_THROWS_WITH_AS(s->set("d", as_bytes("1")), doctest::Contains("limit"), dtrain::ConfigError);
    s->set("a", as_bytes("2"));  // overwriting is fine
    CHECK_THROWS_WITH_AS(s->set("b", Bytes(2000)), doctest::Contains("limit"), dtrain::ConfigError);
    auto other = srv.connect("run2");  // another run has its own budget
    other->set("d", as_bytes("1"));
  }

  TEST_CASE("binding rules") {
    SUBCASE("a tokenless server refuses a non-loopback address") {
      ServerOptions o;
      o.host = "0.0.0.0";
      Server s(o);
      CHECK_THROWS_WITH_AS(s.start(), doctest::Contains("without a token"), dtrain::ConfigError);
    }
    SUBCASE("a port in use names the problem") {
      TestServer a;
      ServerOptions o;
      o.port = a.port();
      Server s(o);
      CHECK_THROWS_WITH_AS(s.start(), doctest::Contains("address already in use"), dtrain::IoError);
    }
  }

  TEST_CASE("stop while clients are blocked, then start again on the same port") {
    int port;
    {
      TestServer srv;
      port = srv.port();
      auto s = srv.connect();
      std::thread t([&] { CHECK_THROWS_AS(s->get("never", 30s), dtrain::IoError); });
      std::this_thread::sleep_for(100ms);
      srv.server->stop();
      t.join();
    }
    ServerOptions o;
    o.port = port;
    TestServer again(o);
    CHECK(again.port() == port);
  }

  TEST_CASE("started without serving: a client waits in the backlog until serve(); stop() without serve()") {
    {
      Server idle(ServerOptions{});
      idle.start(/*serve_now=*/false);
      CHECK(idle.port() > 0);
      CHECK(idle.listen_fd() >= 0);
      idle.stop();  // the loop was never run on a thread of its own: closed here
    }
    Server srv(ServerOptions{});
    srv.start(/*serve_now=*/false);
    pollfd pfd{srv.listen_fd(), POLLIN, 0};
    CHECK(::poll(&pfd, 1, 0) == 0);  // nobody yet
    std::unique_ptr<TcpStore> client;
    std::thread t([&] {
      ClientOptions c;
      c.host = "127.0.0.1";
      c.port = srv.port();
      c.run_id = "run1";
      c.connect_timeout = 10s;
      client = connect_store(c);  // its handshake waits until the server serves
    });
    REQUIRE(::poll(&pfd, 1, 10000) == 1);  // a connection is pending: what the agent watches for
    srv.serve();
    srv.serve();  // once is enough
    t.join();
    REQUIRE(client);
    client->set("k", as_bytes("v"));
    CHECK(client->get("k", 5s) == Bytes{static_cast<std::uint8_t>('v')});
    client.reset();
    srv.stop();
  }
}
