// The TCP mesh's connection handshake (engine/tcp/mesh_handshake.hpp) as pure state machines:
// two holders of the secret prove it to each other; a wrong secret, a foreign greeting, a rank out of
// turn, a replayed or reflected proof are refused with a reason.
#include <doctest/doctest.h>

#include "dtrain/rendezvous/store/auth.hpp"
#include "engine/tcp/mesh_handshake.hpp"

using namespace dtrain::coll::tcp::handshake;
using dtrain::rdzv::Bytes;
using dtrain::rdzv::auth::random_nonce;

namespace {

// Runs connector <-> acceptor to the end; returns the acceptor's error ("" when both finished).
std::string run(Connector& c, Acceptor& a, std::string* connector_error = nullptr) {
  Step s = a.take(c.hello());
  if (!s.error.empty()) return s.error;
  Step cs = c.take(s.reply);  // challenge -> proof
  REQUIRE(cs.error.empty());
  s = a.take(cs.reply);
  if (!s.error.empty()) return s.error;
  CHECK(s.done);
  cs = c.take(s.reply);
  if (connector_error != nullptr) *connector_error = cs.error;
  CHECK(cs.done == cs.error.empty());
  return "";
}

}  // namespace

TEST_SUITE("collectives::mesh_handshake") {
  TEST_CASE("two holders of the secret prove it to each other; the rank is known once proven") {
    const Bytes secret = random_nonce();
    Connector c(secret, 2, 0, 3, random_nonce());
    Acceptor a(secret, 0, 3, random_nonce());
    CHECK(c.hello().size() == kHelloBytes);
    CHECK(a.want() == kHelloBytes);
    std::string cerr;
    CHECK(run(c, a, &cerr) == "");
    CHECK(cerr == "");
    CHECK(a.peer() == 2);
    CHECK(a.want() == 0);
    CHECK(c.want() == 0);
  }

  TEST_CASE("a wrong secret is refused on either side") {
    const Bytes secret = random_nonce();
    Connector stranger(random_nonce(), 1, 0, 3, random_nonce());
    Acceptor a(secret, 0, 3, random_nonce());
    CHECK(run(stranger, a).find("wrong proof for rank 1") != std::string::npos);
    CHECK(a.want() == 0);  // nothing more is read from it

    // A listener without the secret: the connector refuses its answer.
    Connector c(secret, 1, 0, 3, random_nonce());
    Acceptor fake(random_nonce(), 0, 3, random_nonce());
    Step s = fake.take(c.hello());
    Step proof_c = c.take(s.reply);
    // The fake listener cannot check the proof; it answers something of the right size.
    Step last = c.take(Bytes(kProofBytes, 0x41));
    CHECK(last.error.find("wrong proof from the listener") != std::string::npos);
    CHECK_FALSE(last.done);
    (void)proof_c;
  }

  TEST_CASE("foreign greetings and ranks out of turn are refused with the reason") {
    const Bytes secret = random_nonce();
    Acceptor a(secret, 1, 4, random_nonce());
    Bytes garbage(kHelloBytes, 'G');
    CHECK(a.take(garbage).error.find("not a dtrain mesh greeting") != std::string::npos);

    Acceptor b(secret, 1, 4, random_nonce());
    CHECK(b.take(Connector(secret, 0, 1, 4, random_nonce()).hello()).error.find("does not connect to rank 1") !=
          std::string::npos);  // lower ranks are connected to, not accepted
    Acceptor c(secret, 1, 4, random_nonce());
    CHECK(c.take(Connector(secret, 4, 1, 4, random_nonce()).hello()).error.find("rank 4") != std::string::npos);
    Acceptor d(secret, 1, 4, random_nonce());
    CHECK(d.take(Connector(secret, 2, 1, 5, random_nonce()).hello()).error.find("group of 5 ranks, not 4") !=
          std::string::npos);
    Acceptor e(secret, 1, 4, random_nonce());
    CHECK(e.take(Bytes(3, 0)).error == "a message out of turn");
  }

  TEST_CASE("a recorded proof does not pass a fresh challenge, and the acceptor's proof is not a connector's") {
    const Bytes secret = random_nonce();
    Connector c(secret, 2, 0, 3, random_nonce());
    Acceptor a(secret, 0, 3, random_nonce());
    Step ch = a.take(c.hello());
    Step pc = c.take(ch.reply);
    Step pa = a.take(pc.reply);
    REQUIRE(pa.done);

    // Replay: the same hello and proof against a new acceptor (a new nonce).
    Acceptor again(secret, 0, 3, random_nonce());
    REQUIRE(again.take(c.hello()).error.empty());
    CHECK(again.take(pc.reply).error.find("wrong proof") != std::string::npos);

    // Reflection: the acceptor's own proof sent back as a connector's.
    const Bytes hello = c.hello();
    const Bytes cn(hello.begin() + 16, hello.end());
    CHECK(proof(secret, false, cn, ch.reply, 2, 0, 3) == pa.reply);
    CHECK(proof(secret, true, cn, ch.reply, 2, 0, 3) == pc.reply);
    CHECK(pa.reply != pc.reply);
    // The proof binds the ranks: the same nonces for another pair give another proof.
    CHECK(proof(secret, true, cn, ch.reply, 1, 0, 3) != pc.reply);
  }
}
