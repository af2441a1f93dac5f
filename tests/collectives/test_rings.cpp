// Point-to-point through the shared-memory rings (engine/shm/rings.cpp), local ranks as threads over
// one segment with the smallest rings (16 KiB of data), so messages wrap and stream in pieces:
// every size from empty through the 24 bytes inline in the header to many times the ring, both
// directions at once; a small message returns before its receiver arrives; the next frame is seen
// without being taken (peek); a receive that does not match the frame is refused naming both; a
// peer that leaves before sending is named.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "shm_ranks.hpp"

using namespace dtrain::coll;
using namespace dtrain::coll::test;
using namespace std::chrono_literals;

namespace {

P2pMsg message(std::uint64_t seq, int peer, int tag, std::size_t count, const void* src, void* dst) {
  P2pMsg m;
  m.peer = peer;
  m.src = src;
  m.dst = dst;
  m.d.seq = seq;
  m.d.tag = tag;
  m.d.count = count;
  m.d.dtype = DTRAIN_UINT8;
  m.d.timeout = 30s;
  m.d.deadline = Clock::now() + m.d.timeout;
  return m;
}

std::vector<std::uint8_t> bytes_of(int from, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 31 + static_cast<std::size_t>(from) * 7);
  return v;
}

}  // namespace

TEST_SUITE("collectives::shm::rings") {
  TEST_CASE("every size, wrapping the ring and streaming through it, both directions at once") {
    LocalGroup g;
    g.size = 2;
    g.p2p_bytes = 0;  // the smallest rings
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      const int peer = 1 - r;
      std::uint64_t seq = 0;
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{24}, std::size_t{25}, std::size_t{64},
                            std::size_t{5000}, std::size_t{16384}, std::size_t{20001}, std::size_t{1} << 20}) {
        ++seq;
        const auto mine = bytes_of(r, n);
        std::vector<std::uint8_t> got(n, 0xee);
        const P2pMsg out = message(seq, peer, 1, n, mine.data(), nullptr);
        const P2pMsg in = message(seq, peer, 1, n, nullptr, got.data());
        rank->rings.sendrecv(&out, &in);
        if (got != bytes_of(peer, n)) throw std::runtime_error("wrong bytes at size " + std::to_string(n));
      }
    }));
  }

  TEST_CASE("a message that fits returns before its receiver arrives; peek sees it without taking it") {
    LocalGroup g;
    g.size = 2;
    std::atomic<bool> sent{false};
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      const auto mine = bytes_of(0, 1000);
      if (r == 0) {
        const P2pMsg out = message(1, 1, 42, mine.size(), mine.data(), nullptr);
        rank->rings.sendrecv(&out, nullptr);
        sent = true;
        sent.notify_all();
        return;
      }
      sent.wait(false);
      std::uint64_t fp0 = 0, fp1 = 0;
      if (rank->rings.peek(0, fp0, fp1) != Engine::kMessage) throw std::runtime_error("peek saw no message");
      const P2pMsg in = message(1, 0, 42, mine.size(), nullptr, nullptr);
      if (fp0 != in.d.fp0() || fp1 != in.d.fp1()) throw std::runtime_error("peek: another fingerprint");
      std::vector<std::uint8_t> got(mine.size());
      P2pMsg take = in;
      take.dst = got.data();
      rank->rings.sendrecv(nullptr, &take);
      if (got != mine) throw std::runtime_error("wrong bytes after peek");
      if (rank->rings.peek(0, fp0, fp1) == Engine::kMessage) throw std::runtime_error("peek after the receive");
    }));
  }

  TEST_CASE("a receive that does not match the next frame is refused, naming both") {
    LocalGroup g;
    g.size = 2;
    std::string text;
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      std::vector<std::uint8_t> buf(100);
      if (r == 0) {
        const P2pMsg out = message(1, 1, 5, 100, buf.data(), nullptr);
        rank->rings.sendrecv(&out, nullptr);
        return;
      }
      const P2pMsg in = message(1, 0, 5, 99, nullptr, buf.data());
      text = status_of([&] { rank->rings.sendrecv(nullptr, &in); }).second;
    }));
    CHECK_MESSAGE(text.find("recv #1 (tag 5, count 99, uint8) from rank 0 on rank 1 does not match rank 0's send #1 "
                            "(tag 5, count 100, uint8)") != std::string::npos,
                  text);
  }

  TEST_CASE("a peer that leaves before it sent the whole message is named; peek says it is gone") {
    LocalGroup g;
    g.size = 2;
    g.spin_us = 0;
    std::string text;
    Engine::Peek after = Engine::kNone;
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      if (r == 1) {
        const auto& bell = rank->segment.ctl(0).bell_sleepers;
        if (!wait_until([&] { return bell.load() > 0; }, 30s)) throw std::runtime_error("rank 0 never slept");
        rank.reset();
        return;
      }
      std::vector<std::uint8_t> buf(100);
      const P2pMsg in = message(1, 1, 0, 100, nullptr, buf.data());
      text = status_of([&] { rank->rings.sendrecv(nullptr, &in); }).second;
      std::uint64_t fp0 = 0, fp1 = 0;
      after = rank->rings.peek(1, fp0, fp1);
    }));
    CHECK_MESSAGE(text.find("recv #1 (tag 0, count 100, uint8) from rank 1 on rank 0: rank 1 destroyed its "
                            "communicator") != std::string::npos,
                  text);
    CHECK(after == Engine::kGone);
  }
}
