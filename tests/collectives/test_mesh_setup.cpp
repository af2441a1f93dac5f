// The TCP mesh's setup (engine/tcp/mesh_setup.cpp) against strangers on real loopback sockets:
// while three ranks (threads, an in-memory store) set up a TCP communicator, a stranger connects to
// rank 0's listening port and sends garbage, a greeting with a wrong secret (claiming rank 1's
// place, before the real rank 1), nothing at all, or half a greeting and closes. Every time the
// ranks still connect to each other and allreduce correctly, well within the per-connection
// handshake deadline, and rank 0's warning names the stranger's address and port.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "../common/stderr_capture.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "engine/tcp/mesh_handshake.hpp"
#include "engine/engine.hpp"

using namespace dtrain::coll;
using namespace std::chrono_literals;
namespace hs = dtrain::coll::tcp::handshake;
using dtrain::rdzv::Bytes;

namespace {

enum class Kind { garbage, wrong_secret, silent, early_close };

EngineOptions options_for(int rank, dtrain::rdzv::Store* store) {
  EngineOptions o;
  o.members = {0, 1, 2};
  o.rank = rank;
  o.node = {rank};  // one rank a host: the tcp engine
  o.kind = "tcp";
  o.store = store;
  o.key_prefix = "coll/1/";
  o.advertise = "127.0.0.1";
  o.timeout = 20s;
  o.tcp_chunk_bytes = 16 * 1024;
  return o;
}

OpDesc allreduce_op(std::size_t count) {
  OpDesc d;
  d.seq = 1;
  d.kind = OpKind::allreduce;
  d.dtype = DTRAIN_FLOAT32;
  d.op = DTRAIN_SUM;
  d.count = count;
  d.deadline = Clock::now() + 20s;
  return d;
}

// The shared store as rank 2 sees it: its read of the mesh secret (after every address is published,
// before it connects) waits until `open` is ready, so rank 0 is still accepting while the stranger
// acts.
class GatedStore final : public dtrain::rdzv::Store {
 public:
  GatedStore(dtrain::rdzv::Store& base, std::shared_future<void> open) : base_(base), open_(std::move(open)) {}
  void set(std::string_view k, dtrain::rdzv::ByteView v) override { base_.set(k, v); }
  Bytes get(std::string_view k, dtrain::rdzv::milliseconds t) override {
    if (k.ends_with("tcp/secret")) open_.wait();
    return base_.get(k, t);
  }
  std::int64_t add(std::string_view k, std::int64_t d) override { return base_.add(k, d); }
  Bytes compare_set(std::string_view k, dtrain::rdzv::ByteView e, dtrain::rdzv::ByteView d) override {
    return base_.compare_set(k, e, d);
  }
  bool check(std::span<const std::string> keys) override { return base_.check(keys); }
  bool erase(std::string_view k) override { return base_.erase(k); }
  void barrier(std::string_view n, int c, dtrain::rdzv::milliseconds t) override { base_.barrier(n, c, t); }

 private:
  dtrain::rdzv::Store& base_;
  std::shared_future<void> open_;
};

// The address rank 0 published.
sockaddr_in rank0_address(dtrain::rdzv::Store& store) {
  const std::string rec = dtrain::rdzv::to_string(store.get("coll/1/tcp/0", 20s));
  char addr[64] = {};
  int port = 0;
  REQUIRE(std::sscanf(rec.c_str(), "%63s %d", addr, &port) == 2);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  REQUIRE(::inet_pton(AF_INET, addr, &sa.sin_addr) == 1);
  return sa;
}

// Connects to rank 0's published address; returns the socket and sets `me` to its own
// "127.0.0.1:port" (what rank 0's warning must name).
int connect_to_rank0(dtrain::rdzv::Store& store, std::string& me) {
  sockaddr_in sa = rank0_address(store);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in mine{};
  socklen_t sl = sizeof mine;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &sl);
  me = fmt::format("127.0.0.1:{}", ntohs(mine.sin_port));
  return fd;
}

// What the stranger does once connected; returns what it heard back after its greeting.
std::string behave(int fd, Kind kind) {
  switch (kind) {
    case Kind::garbage: {
      const std::string junk = "GET / HTTP/1.1\r\nHost: worker\r\n\r\n0123456789abcdef";
      CHECK(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(junk.size()));
      return "";
    }
    case Kind::wrong_secret: {  // a well-formed greeting for rank 1 without the secret
      hs::Connector c(dtrain::rdzv::auth::random_nonce(), 1, 0, 3, dtrain::rdzv::auth::random_nonce());
      const Bytes hello = c.hello();
      CHECK(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size()));
      Bytes challenge(hs::kChallengeBytes);
      CHECK(::recv(fd, challenge.data(), challenge.size(), MSG_WAITALL) == static_cast<ssize_t>(challenge.size()));
      const Bytes proof = c.take(challenge).reply;
      CHECK(::send(fd, proof.data(), proof.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(proof.size()));
      char answer[64];
      const ssize_t k = ::recv(fd, answer, sizeof answer, 0);
      return k == 0 ? "closed" : fmt::format("{} bytes", k);  // rank 0 answers a wrong proof with nothing
    }
    case Kind::silent:
      return "";
    case Kind::early_close: {
      const Bytes half = hs::Connector(Bytes(32, 1), 2, 0, 3, Bytes(32, 2)).hello();
      CHECK(::send(fd, half.data(), 10, MSG_NOSIGNAL) == 10);
      ::close(fd);
      return "";
    }
  }
  return "";
}

}  // namespace

TEST_SUITE("collectives::mesh_setup") {
  TEST_CASE("a stranger on a worker's port is dropped with its address named, and the job goes on") {
    for (Kind kind : {Kind::garbage, Kind::wrong_secret, Kind::silent, Kind::early_close}) {
      CAPTURE(static_cast<int>(kind));
      dtrain::test::StderrCapture log("dtrain-mesh-setup");
      auto store = dtrain::rdzv::make_memory_store();
      std::promise<void> stranger_done;
      GatedStore gated(*store, stranger_done.get_future().share());
      std::vector<std::string> errors(3);
      std::vector<float> result(3, -1);
      auto rank = [&](int r) {
        try {
          auto t = make_engine(options_for(r, r == 2 ? &gated : store.get()));
          std::vector<float> x(1000, static_cast<float>(r + 1));
          t->allreduce(allreduce_op(x.size()), x.data(), x.data());
          result[static_cast<std::size_t>(r)] = x.back();
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
        }
      };
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> threads;
      threads.emplace_back(rank, 0);
      // The stranger connects first (rank 0 takes it from its backlog before the real peers) ...
      std::string me;
      int fd = connect_to_rank0(*store, me);
      std::string heard;
      std::thread stranger([&] {
        heard = behave(fd, kind);
        stranger_done.set_value();
      });
      // ... then ranks 1 and 2 start; rank 2 connects once the stranger is through.
      threads.emplace_back(rank, 1);
      threads.emplace_back(rank, 2);
      for (auto& t : threads) t.join();
      stranger.join();
      const auto took = std::chrono::steady_clock::now() - t0;
      if (kind != Kind::early_close) ::close(fd);
      const std::string text = log.text();
      INFO(text);
      for (const auto& e : errors) CHECK(e == "");
      for (float v : result) CHECK(v == 6.0f);  // 1 + 2 + 3: nobody took a real rank's place
      CHECK(took < 8s);                         // a silent stranger does not hold the setup up
      CHECK(text.find("TCP engine: rank 0 dropped a connection from " + me + ": ") != std::string::npos);
      if (kind == Kind::wrong_secret) {
        CHECK(heard == "closed");
        CHECK(text.find("wrong proof for rank 1") != std::string::npos);
      }
      if (kind == Kind::garbage) CHECK(text.find("not a dtrain mesh greeting") != std::string::npos);
      if (kind == Kind::silent)
        CHECK(text.find("had not completed the handshake when every rank was connected") != std::string::npos);
      if (kind == Kind::early_close)
        CHECK(text.find("closed the connection during the handshake (10 bytes") != std::string::npos);
    }
  }

  TEST_CASE("once every rank is connected the listener is closed: a late stranger is refused") {
    auto store = dtrain::rdzv::make_memory_store();
    std::vector<std::unique_ptr<Engine>> ts(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] { ts[static_cast<std::size_t>(r)] = make_engine(options_for(r, store.get())); });
    for (auto& t : threads) t.join();
    sockaddr_in sa = rank0_address(*store);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0);
    ::close(fd);
    // The secret the ranks shared is in the store, 32 random bytes.
    CHECK(store->get("coll/1/tcp/secret", 1s).size() == hs::kSecretBytes);
  }
}
