// Point-to-point with ranks as threads on the shared-memory, TCP and hierarchical engines: every
// dtype and sizes from 0 to several MiB, rings and neighbour exchanges through sendrecv, tags and
// in-order matching, small sends that return before the receiver arrives, messages to oneself, and
// messages that cross collectives on the same sockets.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "harness.hpp"

namespace {

// The engines under test: name, world, expected engine name.
struct Setup {
  const char* name;
  World world;
};

std::vector<Setup> setups(int size) {
  World shm, tcp, hier;
  shm.size = tcp.size = hier.size = size;
  tcp.transport = "tcp";
  hier.local_size = size / 2;
  return {{"shm", shm}, {"tcp", tcp}, {"hierarchical", hier}};
}

// Byte i of the message `seq` from `from` to `to`.
std::uint8_t pattern(int from, int to, int seq, std::size_t i) {
  return static_cast<std::uint8_t>((i * 131u + static_cast<std::size_t>(from) * 7u + static_cast<std::size_t>(to) * 13u +
                                    static_cast<std::size_t>(seq) * 29u) >> 1);
}

std::vector<std::uint8_t> message_bytes(int from, int to, int seq, std::size_t bytes) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = pattern(from, to, seq, i);
  return v;
}

P2pArgs send_args(const void* buf, std::size_t count, dtrain_dtype_t t, int peer, int tag = 0) {
  return P2pArgs{buf, nullptr, count, t, peer, tag, false};
}
P2pArgs recv_args(void* buf, std::size_t count, dtrain_dtype_t t, int peer, int tag = 0) {
  return P2pArgs{nullptr, buf, count, t, peer, tag, false};
}

}  // namespace

TEST_SUITE("collectives::p2p") {
  TEST_CASE("a ring of sendrecv: every dtype, sizes 0 .. 3 MiB, every engine") {
    for (const Setup& s : setups(4)) {
      CAPTURE(s.name);
      std::atomic<int> wrong{0};
      std::string engine;
      std::mutex mu;
      auto errors = run_ranks(s.world, [&](Communicator& c, int r) {
        if (r == 0) {
          std::lock_guard l(mu);
          engine = c.engine_name();
        }
        const int n = c.size(), next = (r + 1) % n, prev = (r + n - 1) % n;
        int seq = 0;
        for (dtrain_dtype_t t : kAllDtypes)
          for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000},
                                    std::size_t{65537}, std::size_t{(3u << 20) / dtype_size(t) + 5}}) {
            if (count > 100000 && t != DTRAIN_FLOAT64 && t != DTRAIN_INT8) continue;
            ++seq;
            const std::size_t bytes = count * dtype_size(t);
            auto out = message_bytes(r, next, seq, bytes);
            std::vector<std::uint8_t> in(bytes + 1, 0xee);
            P2pArgs sa = send_args(out.data(), count, t, next, seq), ra = recv_args(in.data(), count, t, prev, seq);
            c.sendrecv(&sa, &ra);
            const bool guard_ok = in.back() == 0xee;  // the byte after the message is untouched
            in.pop_back();
            if (!guard_ok || in != message_bytes(prev, r, seq, bytes)) ++wrong;
          }
      });
      no_errors(errors);
      CHECK(wrong == 0);
      CHECK(engine == s.name);
    }
  }

  TEST_CASE("send then recv in pairs, tags in order, and small sends that do not wait for the receiver") {
    for (const Setup& s : setups(4)) {
      CAPTURE(s.name);
      std::atomic<int> wrong{0};
      std::atomic<int> sent_early{0};
      auto errors = run_ranks(s.world, [&](Communicator& c, int r) {
        const int partner = r ^ 1;
        // Even ranks send three small messages (tags 1, 2, 3) and a 64 KiB one, then receive; odd
        // ranks wait until their partner returned from all four sends before receiving anything.
        std::vector<std::vector<std::uint8_t>> msgs;
        for (int k = 1; k <= 4; ++k) msgs.push_back(message_bytes(r & ~1, r | 1, k, k == 4 ? 65536 : 100 * k));
        if (r % 2 == 0) {
          for (int k = 1; k <= 4; ++k) {
            P2pArgs a = send_args(msgs[k - 1].data(), msgs[k - 1].size(), DTRAIN_UINT8, partner, k);
            c.sendrecv(&a, nullptr);
          }
          ++sent_early;
        } else {
          if (!wait_until([&] { return sent_early.load() == 2; }, 20s))
            throw std::runtime_error("the even ranks' sends did not return before their receivers came");
          for (int k = 1; k <= 4; ++k) {
            std::vector<std::uint8_t> in(msgs[k - 1].size());
            P2pArgs a = recv_args(in.data(), in.size(), DTRAIN_UINT8, partner, k);
            c.sendrecv(nullptr, &a);
            if (in != msgs[k - 1]) ++wrong;
          }
        }
        // And back, as int32, the odd rank sending first.
        std::vector<std::int32_t> v(777), w(777);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i * 3 + static_cast<std::size_t>(r));
        P2pArgs a = send_args(v.data(), v.size(), DTRAIN_INT32, partner, 9), b = recv_args(w.data(), w.size(), DTRAIN_INT32, partner, 9);
        if (r % 2 == 1) {
          c.sendrecv(&a, nullptr);
          c.sendrecv(nullptr, &b);
        } else {
          c.sendrecv(nullptr, &b);
          c.sendrecv(&a, nullptr);
        }
        for (std::size_t i = 0; i < w.size(); ++i)
          if (w[i] != static_cast<std::int32_t>(i * 3 + static_cast<std::size_t>(partner))) ++wrong;
      });
      no_errors(errors);
      CHECK(wrong == 0);
      CHECK(sent_early == 2);
    }
  }

  TEST_CASE("both neighbours at once: large 1F1B exchanges through sendrecv do not deadlock") {
    for (const Setup& s : setups(4)) {
      CAPTURE(s.name);
      std::atomic<int> wrong{0};
      auto errors = run_ranks(s.world, [&](Communicator& c, int r) {
        // Stage r sends activations forward and receives gradients back from r+1, while r+1 sends
        // its gradients back and receives the next activations: both directions 4 MiB at once.
        const int n = c.size();
        const std::size_t count = (4u << 20) / sizeof(double);
        std::vector<double> act(count), grad(count), got_act(count), got_grad(count);
        for (int step = 0; step < 3; ++step) {
          for (std::size_t i = 0; i < count; ++i) {
            act[i] = r * 1000.0 + step + static_cast<double>(i);
            grad[i] = -(r * 1000.0 + step + static_cast<double>(i));
          }
          P2pArgs fwd = send_args(act.data(), count, DTRAIN_FLOAT64, r + 1, 1);
          P2pArgs bwd_in = recv_args(got_grad.data(), count, DTRAIN_FLOAT64, r + 1, 2);
          P2pArgs bwd = send_args(grad.data(), count, DTRAIN_FLOAT64, r - 1, 2);
          P2pArgs fwd_in = recv_args(got_act.data(), count, DTRAIN_FLOAT64, r - 1, 1);
          if (r + 1 < n) c.sendrecv(&fwd, &bwd_in);  // send forward, receive backward
          if (r > 0) c.sendrecv(&bwd, &fwd_in);      // send backward, receive forward
          for (std::size_t i = 0; i < count; i += 997) {
            if (r + 1 < n && got_grad[i] != -((r + 1) * 1000.0 + step + static_cast<double>(i))) ++wrong;
            if (r > 0 && got_act[i] != (r - 1) * 1000.0 + step + static_cast<double>(i)) ++wrong;
          }
        }
      });
      no_errors(errors);
      CHECK(wrong == 0);
    }
  }

  TEST_CASE("messages to oneself are queued; a receive with none waiting is refused at once") {
    World w;
    w.size = 2;
    auto errors = run_ranks(w, [&](Communicator& c, int r) {
      std::int64_t a[3] = {r, 2, 3}, b[3] = {};
      P2pArgs s1 = send_args(a, 3, DTRAIN_INT64, r, 4), r1 = recv_args(b, 3, DTRAIN_INT64, r, 4);
      c.sendrecv(&s1, nullptr);
      a[0] = 99;  // the queued message is a copy
      c.sendrecv(nullptr, &r1);
      if (b[0] != r || b[2] != 3) throw std::runtime_error("self message content");
      c.sendrecv(&s1, &r1);  // both directions at once
      auto [st, msg] = status_of([&] { c.sendrecv(nullptr, &r1); });
      if (st != DTRAIN_ERR_INVALID_ARGUMENT || msg.find("itself") == std::string::npos)
        throw std::runtime_error("empty self receive: " + msg);
      c.barrier();  // still usable
    });
    no_errors(errors);
  }

  TEST_CASE("a message sent before a collective waits for its receive after it (TCP: parked)") {
    for (const Setup& s : setups(4)) {
      CAPTURE(s.name);
      std::atomic<int> wrong{0};
      auto errors = run_ranks(s.world, [&](Communicator& c, int r) {
        const int n = c.size();
        std::vector<float> m(5000, static_cast<float>(r)), in(5000);
        P2pArgs a = send_args(m.data(), m.size(), DTRAIN_FLOAT32, (r + 1) % n, 3);
        c.sendrecv(&a, nullptr);
        for (int k = 0; k < 3; ++k) {
          std::vector<double> x(100000, 1.0), y(100000);
          c.allreduce(x.data(), y.data(), x.size(), DTRAIN_FLOAT64, DTRAIN_SUM);
          if (y[777] != n) ++wrong;
        }
        P2pArgs b = recv_args(in.data(), in.size(), DTRAIN_FLOAT32, (r + n - 1) % n, 3);
        c.sendrecv(nullptr, &b);
        if (in[4999] != static_cast<float>((r + n - 1) % n)) ++wrong;
      });
      no_errors(errors);
      CHECK(wrong == 0);
    }
  }
}
