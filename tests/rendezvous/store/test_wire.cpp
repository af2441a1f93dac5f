#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

using namespace dtrain::rdzv;
using wire::Frame;
using wire::Op;

TEST_SUITE("rendezvous::wire") {
  TEST_CASE("a frame round-trips byte-exact, fed one byte at a time") {
    Bytes blob(128);
    for (std::size_t i = 0; i < blob.size(); ++i) blob[i] = std::uint8_t(255 - i);
    Frame f(Op::set);
    f.str("nccl/id").bytes(blob).i64(-42);
    Bytes enc = wire::encode(f);
    wire::Decoder d;
    for (std::size_t i = 0; i + 1 < enc.size(); ++i) {
      d.feed(&enc[i], 1);
      CHECK_FALSE(d.next().has_value());
      CHECK(d.partial());
    }
    d.feed(&enc.back(), 1);
    auto g = d.next();
    REQUIRE(g.has_value());
    CHECK(g->op == Op::set);
    CHECK(g->str_at(0) == "nccl/id");
    CHECK(Bytes(g->bytes_at(1).begin(), g->bytes_at(1).end()) == blob);
    CHECK(g->i64_at(2) == -42);
    CHECK_FALSE(d.partial());
  }

  TEST_CASE("several frames in one read") {
    Bytes enc;
    for (int i = 0; i < 5; ++i) wire::encode(Frame(Op::add).str("k").i64(i), enc);
    wire::Decoder d;
    d.feed(enc.data(), enc.size());
    for (int i = 0; i < 5; ++i) {
      auto f = d.next();
      REQUIRE(f);
      CHECK(f->i64_at(1) == i);
    }
    CHECK_FALSE(d.next());
  }

  TEST_CASE("malformed input is rejected with a reason") {
    wire::Decoder d;
    SUBCASE("oversize length, before any body arrives") {
      Bytes h{0x7f, 0xff, 0xff, 0xff};
      CHECK_THROWS_WITH_AS(d.feed(h.data(), h.size()), doctest::Contains("exceeds"), wire::ProtocolError);
    }
    SUBCASE("bad version") {
      Bytes enc = wire::encode(Frame(Op::ok));
      enc[4] = 9;
      CHECK_THROWS_WITH_AS(d.feed(enc.data(), enc.size()), doctest::Contains("version 9"), wire::ProtocolError);
    }
    SUBCASE("unknown op") {
      Bytes enc = wire::encode(Frame(Op::ok));
      enc[5] = 250;
      d.feed(enc.data(), enc.size());
      CHECK_THROWS_WITH_AS(d.next(), doctest::Contains("unknown op"), wire::ProtocolError);
    }
    SUBCASE("argument count larger than the frame") {
      Bytes enc = wire::encode(Frame(Op::ok));
      enc[9] = 200;  // argc = 200 with no bytes behind it
      d.feed(enc.data(), enc.size());
      CHECK_THROWS_AS(d.next(), wire::ProtocolError);
    }
    SUBCASE("argument length past the end") {
      Bytes enc = wire::encode(Frame(Op::set).str("abc"));
      enc[13] = 50;
      d.feed(enc.data(), enc.size());
      CHECK_THROWS_WITH_AS(d.next(), doctest::Contains("claims"), wire::ProtocolError);
    }
    SUBCASE("too short for a header") {
      Bytes enc{0, 0, 0, 2, 1, 100};
      CHECK_THROWS_AS(d.feed(enc.data(), enc.size()), wire::ProtocolError);
    }
  }

  TEST_CASE("random garbage is rejected or decoded exactly, never misread") {
    // Each input either throws ProtocolError, or every frame decoded from it re-encodes to exactly
    // the bytes it came from and the rest stays buffered. Every fourth input starts with a valid
    // frame, which must come out first and unchanged whatever garbage follows.
    std::mt19937 rng(12345);
    const Frame valid = Frame(Op::set).str("k").i64(7);
    const Bytes valid_enc = wire::encode(valid);
    int rejected = 0, decoded = 0;
    for (int round = 0; round < 2000; ++round) {
      CAPTURE(round);
      Bytes junk(std::size_t(rng() % 64));
      for (auto& b : junk) b = std::uint8_t(rng());
      if (round % 3 == 0 && junk.size() >= 5) {  // plausible header, random body
        junk[0] = junk[1] = 0;
        junk[4] = wire::kVersion;
      }
      const bool starts_valid = round % 4 == 0;
      if (starts_valid) junk.insert(junk.begin(), valid_enc.begin(), valid_enc.end());
      wire::Decoder d;
      Bytes reencoded;
      int frames = 0;
      try {
        d.feed(junk.data(), junk.size());
        while (auto f = d.next()) {
          if (frames++ == 0 && starts_valid) CHECK(wire::encode(*f) == valid_enc);
          wire::encode(*f, reencoded);
        }
      } catch (const wire::ProtocolError&) {
        ++rejected;
        CHECK((!starts_valid || frames >= 1));  // the valid frame came out before the garbage was refused
        continue;
      }
      if (frames > 0) ++decoded;
      REQUIRE(reencoded.size() + d.buffered() == junk.size());
      CHECK(std::equal(reencoded.begin(), reencoded.end(), junk.begin()));
      CHECK(d.partial() == (d.buffered() > 0));
    }
    CHECK(rejected > 100);  // the inputs do reach the checks, not only the "need more bytes" path
    CHECK(decoded > 100);
  }

  TEST_CASE("encode refuses frames over the limit") {
    Frame f(Op::set);
    f.str("k").bytes(Bytes(wire::kMaxFrame, 0));
    CHECK_THROWS_AS(wire::encode(f), wire::ProtocolError);
  }

  TEST_CASE("pack and unpack nested records") {
    auto p = wire::pack({Bytes{1, 2}, Bytes{}, wire::i64_bytes(7)});
    auto u = wire::unpack(p);
    REQUIRE(u.size() == 3);
    CHECK(u[0] == Bytes{1, 2});
    CHECK(u[1].empty());
    CHECK(wire::bytes_i64(u[2]) == 7);
    p.pop_back();
    CHECK_THROWS_AS(wire::unpack(p), wire::ProtocolError);
  }
}

TEST_SUITE("rendezvous::auth") {
  TEST_CASE("HMAC-SHA256 matches RFC 4231 test case 2") {
    auto mac = auth::hmac_sha256("Jefe", as_bytes("what do ya want for nothing?"));
    static const std::uint8_t expect[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                          0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                          0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    CHECK(mac == Bytes(std::begin(expect), std::end(expect)));
  }

  TEST_CASE("proofs bind role, nonces, run id and generation") {
    Bytes a = auth::random_nonce(), b = auth::random_nonce();
    CHECK(a != b);
    auto p = auth::proof("tok", "server", a, b, "run", 0);
    CHECK(auth::constant_time_equal(p, auth::proof("tok", "server", a, b, "run", 0)));
    CHECK_FALSE(auth::constant_time_equal(p, auth::proof("tok", "client", a, b, "run", 0)));
    CHECK_FALSE(auth::constant_time_equal(p, auth::proof("tok", "server", b, a, "run", 0)));
    CHECK_FALSE(auth::constant_time_equal(p, auth::proof("tok", "server", a, b, "run2", 0)));
    CHECK_FALSE(auth::constant_time_equal(p, auth::proof("tok", "server", a, b, "run", 1)));
    CHECK_FALSE(auth::constant_time_equal(p, auth::proof("tok2", "server", a, b, "run", 0)));
    CHECK_FALSE(auth::constant_time_equal(Bytes{}, Bytes{}));
  }
}
