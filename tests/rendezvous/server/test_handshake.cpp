// The server's handshake state machine without sockets, driven by a client that computes its proof
// as TcpStore does.
#include <doctest/doctest.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "handshake.hpp"

using namespace dtrain::rdzv;
using wire::Frame;
using wire::Op;
using Kind = Handshake::Step::Kind;

namespace {

constexpr const char* kToken = "0123456789abcdef0123456789abcdef";

struct Client {
  std::string token, run = "run1";
  std::int64_t generation = 0;
  Bytes nonce = auth::random_nonce();
  Frame hello() const {
    return Frame(Op::hello).str("dtrain-rdzv").str("agent node 1").str(run).i64(generation).bytes(nonce).i64(
        token.empty() ? 0 : 1);
  }
  Frame auth_for(const Frame& challenge) const {
    Bytes snonce(challenge.bytes_at(0).begin(), challenge.bytes_at(0).end());
    return Frame(Op::auth).bytes(token.empty() ? Bytes{} : auth::proof(token, "client", snonce, nonce, run, generation));
  }
};

ServerOptions with_token(std::string token, std::string run_id = {}) {
  ServerOptions o;
  o.token = std::move(token);
  o.run_id = std::move(run_id);
  return o;
}

}  // namespace

TEST_SUITE("rendezvous::server::handshake") {
  TEST_CASE("hello, challenge, auth: ready, scoped by the hello's run id and generation") {
    Client c{kToken};
    c.generation = 4;
    auto opts = with_token(kToken);
    Handshake h;
    CHECK(h.stage() == Handshake::Stage::hello);
    auto ch = h.step(c.hello(), opts);
    REQUIRE(ch.kind == Kind::reply);
    CHECK(ch.reply.op == Op::challenge);
    // the challenge is a fresh nonce and the flag, nothing computed from the token
    REQUIRE(ch.reply.args.size() == 2);
    CHECK(ch.reply.bytes_at(0).size() == auth::kNonceBytes);
    CHECK(ch.reply.i64_at(1) == 1);  // token required
    CHECK(h.stage() == Handshake::Stage::auth);
    auto done = h.step(c.auth_for(ch.reply), opts);
    CHECK(done.kind == Kind::ready);
    CHECK(h.ready());
    CHECK(h.name() == "agent node 1");
    CHECK(h.run_id() == "run1");
    CHECK(h.generation() == 4);
    // only now, to a client that proved the token, the server proves it in the welcome
    Bytes snonce(ch.reply.bytes_at(0).begin(), ch.reply.bytes_at(0).end());
    auto w = h.welcome("10.0.0.7", opts);
    CHECK(w.op == Op::welcome);
    CHECK(w.str_at(0) == "10.0.0.7");
    CHECK(auth::constant_time_equal(w.bytes_at(1), auth::proof(kToken, "server", c.nonce, snonce, "run1", 4)));
  }

  TEST_CASE("no welcome, so no server proof, before the client proved the token") {
    Client c{"a-wrong-token-that-is-long-enough"};
    auto opts = with_token(kToken);
    Handshake h;
    CHECK_THROWS_AS((void)h.welcome("1.2.3.4", opts), dtrain::InternalError);
    auto ch = h.step(c.hello(), opts);
    CHECK(h.step(c.auth_for(ch.reply), opts).kind == Kind::refuse);
    CHECK_THROWS_AS((void)h.welcome("1.2.3.4", opts), dtrain::InternalError);
  }

  TEST_CASE("a tokenless server asks for no proof") {
    Client c;
    Handshake h;
    auto ch = h.step(c.hello(), ServerOptions{});
    REQUIRE(ch.kind == Kind::reply);
    CHECK(ch.reply.i64_at(1) == 0);
    CHECK(h.step(c.auth_for(ch.reply), ServerOptions{}).kind == Kind::ready);
    CHECK(h.welcome("127.0.0.1", ServerOptions{}).bytes_at(1).empty());
  }

  TEST_CASE("refusals carry the reason") {
    Handshake h;
    SUBCASE("wrong token") {
      Client c{"other-token-0123456789abcdef"};
      auto opts = with_token(kToken);
      auto ch = h.step(c.hello(), opts);
      auto r = h.step(c.auth_for(ch.reply), opts);
      CHECK(r.kind == Kind::refuse);
      CHECK(r.reason.find("token mismatch") != std::string::npos);
      CHECK_FALSE(h.ready());
    }
    SUBCASE("no token against a tokened server") {
      auto r = h.step(Client{}.hello(), with_token(kToken));
      CHECK(r.kind == Kind::refuse);
      CHECK(r.reason.find("requires the shared token") != std::string::npos);
    }
    SUBCASE("another run id") {
      auto r = h.step(Client{}.hello(), with_token("", "jobA"));
      CHECK(r.kind == Kind::refuse);
      CHECK(r.reason == "wrong run id 'run1': this rendezvous serves run 'jobA'");
    }
    SUBCASE("an empty run id observes a server bound to a run") {
      Client c;
      c.run = "";
      CHECK(h.step(c.hello(), with_token("", "jobA")).kind == Kind::reply);
    }
    SUBCASE("a negative generation") {
      Client c;
      c.generation = -1;
      auto r = h.step(c.hello(), ServerOptions{});
      CHECK(r.kind == Kind::refuse);
      CHECK(r.reason == "generation -1 is negative");
    }
  }

  TEST_CASE("malformed or out-of-order frames are protocol errors") {
    Handshake h;
    ServerOptions o;
    SUBCASE("a request before hello") {
      CHECK_THROWS_WITH_AS(h.step(Frame(Op::set).str("k").str("v"), o), "sent set before hello", wire::ProtocolError);
    }
    SUBCASE("another protocol") {
      CHECK_THROWS_AS(h.step(Frame(Op::hello).str("http").str("").str("").i64(0).bytes(auth::random_nonce()).i64(0), o),
                      wire::ProtocolError);
    }
    SUBCASE("a short nonce") {
      CHECK_THROWS_WITH_AS(h.step(Frame(Op::hello).str("dtrain-rdzv").str("").str("r").i64(0).bytes(Bytes(3)).i64(0), o),
                           "hello nonce has the wrong size", wire::ProtocolError);
    }
    SUBCASE("missing arguments") {
      CHECK_THROWS_AS(h.step(Frame(Op::hello).str("dtrain-rdzv"), o), wire::ProtocolError);
    }
    SUBCASE("hello twice") {
      h.step(Client{}.hello(), o);
      CHECK_THROWS_AS(h.step(Client{}.hello(), o), wire::ProtocolError);
    }
  }
}
