// In-place forms at the C ABI, with ranks as threads over a real rendezvous server: allreduce and
// broadcast with send == recv; allgather with send == recv + rank*sendcount (NCCL's layout) and
// send == recv; reduce_scatter with recv == send + rank*recvcount (NCCL's layout) and recv == send;
// on the shared-memory and TCP engines, against the out-of-place result. Any other overlap is refused.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "dtrain/collectives.h"
#include "dtrain/rendezvous/server/server.hpp"

namespace {

// Runs body(comm, rank, size) on `size` threads, each with its own communicator from dtrain_comm_init;
// returns each rank's failure text ("" when fine).
std::vector<std::string> run_ranks(int size, const char* transport,
                                   const std::function<std::string(dtrain_comm_t, int, int)>& body) {
  static int run_counter = 0;
  const std::string run_id = fmt::format("inplace-{}-{}", ::getpid(), ++run_counter);
  dtrain::rdzv::ServerOptions so;
  dtrain::rdzv::Server server(so);
  server.start();
  std::vector<std::string> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      dtrain_init_options_t o;
      dtrain_init_options_default(&o);
      o.rank = r;
      o.size = size;
      o.store_host = "127.0.0.1";
      o.store_port = server.port();
      o.run_id = run_id.c_str();
      o.timeout_s = 60;
      o.transport = transport;
      dtrain_comm_t comm = nullptr;
      if (dtrain_comm_init(&o, &comm) != DTRAIN_SUCCESS) {
        errors[static_cast<std::size_t>(r)] = fmt::format("init: {}", dtrain_last_error());
        return;
      }
      errors[static_cast<std::size_t>(r)] = body(comm, r, size);
      dtrain_comm_destroy(comm);
    });
  for (auto& t : threads) t.join();
  server.stop();
  return errors;
}

void check_all(const std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r);
    CHECK(errors[r] == "");
  }
}

std::int32_t value(int rank, std::size_t i) { return static_cast<std::int32_t>(rank * 100003 + static_cast<int>(i % 9973)); }

std::string status_text(dtrain_status_t st, const char* what) {
  return fmt::format("{}: {} ({})", what, dtrain_status_string(st), dtrain_last_error());
}

// Shared-memory slots of 4 KiB, so counts of a few thousand take several chunks.
struct SmallSlots {
  SmallSlots() { ::setenv("DTRAIN_SHM_SLOT_BYTES", "4096", 1); }
  ~SmallSlots() { ::unsetenv("DTRAIN_SHM_SLOT_BYTES"); }
};

constexpr const char* kTransports[] = {"auto", "tcp"};
constexpr int kSizes[] = {1, 2, 3, 4};
constexpr std::size_t kCounts[] = {0, 1, 5, 3001};

// Runs body on every engine (kTransports) and world size (kSizes), checking every rank's text.
void on_every_world(const std::function<std::string(dtrain_comm_t, int, int)>& body) {
  for (const char* transport : kTransports)
    for (int size : kSizes) {
      CAPTURE(transport);
      CAPTURE(size);
      check_all(run_ranks(size, transport, body));
    }
}

}  // namespace

TEST_SUITE("collectives::inplace") {
  TEST_CASE("allgather: send == recv + rank*sendcount and send == recv give the out-of-place result") {
    SmallSlots slots;
    on_every_world([](dtrain_comm_t comm, int rank, int n) -> std::string {
      for (std::size_t count : kCounts) {
        const std::size_t total = count * static_cast<std::size_t>(n);
        std::vector<std::int32_t> send(count), want(total), nccl(total, -1), same(total, -1);
        for (std::size_t i = 0; i < count; ++i) send[i] = value(rank, i);
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < count; ++i) want[static_cast<std::size_t>(r) * count + i] = value(r, i);
        std::vector<std::int32_t> out(total, -1);
        if (auto st = dtrain_allgather(comm, send.data(), out.data(), count, DTRAIN_INT32, nullptr)) return status_text(st, "out of place");
        if (out != want) return fmt::format("out of place: wrong result at count {}", count);
        // NCCL's layout: this rank's contribution already sits in its own block.
        for (std::size_t i = 0; i < count; ++i) nccl[static_cast<std::size_t>(rank) * count + i] = value(rank, i);
        if (auto st = dtrain_allgather(comm, nccl.data() + static_cast<std::size_t>(rank) * count, nccl.data(), count,
                                       DTRAIN_INT32, nullptr))
          return status_text(st, "send == recv + rank*count");
        if (nccl != want) return fmt::format("send == recv + rank*count: wrong result at count {}", count);
        // send == recv: the contribution is the first count elements.
        for (std::size_t i = 0; i < count; ++i) same[i] = value(rank, i);
        if (auto st = dtrain_allgather(comm, same.data(), same.data(), count, DTRAIN_INT32, nullptr))
          return status_text(st, "send == recv");
        if (same != want) return fmt::format("send == recv: wrong result at count {}", count);
      }
      return "";
    });
  }

  TEST_CASE("reduce_scatter: recv == send + rank*recvcount and recv == send give the out-of-place result") {
    SmallSlots slots;
    on_every_world([](dtrain_comm_t comm, int rank, int n) -> std::string {
      for (std::size_t count : kCounts) {
        const std::size_t total = count * static_cast<std::size_t>(n);
        std::vector<std::int32_t> input(total);
        for (std::size_t i = 0; i < total; ++i) input[i] = value(rank, i);
        std::vector<std::int32_t> want(count);
        for (std::size_t i = 0; i < count; ++i) {
          std::int64_t s = 0;
          for (int r = 0; r < n; ++r) s += value(r, static_cast<std::size_t>(rank) * count + i);
          want[i] = static_cast<std::int32_t>(s);
        }
        std::vector<std::int32_t> out(count, -1);
        if (auto st = dtrain_reduce_scatter(comm, input.data(), out.data(), count, DTRAIN_INT32, DTRAIN_SUM, nullptr))
          return status_text(st, "out of place");
        if (out != want) return fmt::format("out of place: wrong result at count {}", count);
        // NCCL's layout: the result lands in this rank's own block of the send buffer.
        std::vector<std::int32_t> nccl = input;
        auto* own = nccl.data() + static_cast<std::size_t>(rank) * count;
        if (auto st = dtrain_reduce_scatter(comm, nccl.data(), own, count, DTRAIN_INT32, DTRAIN_SUM, nullptr))
          return status_text(st, "recv == send + rank*count");
        if (std::vector<std::int32_t>(own, own + count) != want)
          return fmt::format("recv == send + rank*count: wrong result at count {}", count);
        // recv == send: the result lands in the first count elements.
        std::vector<std::int32_t> same = input;
        if (auto st = dtrain_reduce_scatter(comm, same.data(), same.data(), count, DTRAIN_INT32, DTRAIN_SUM, nullptr))
          return status_text(st, "recv == send");
        if (std::vector<std::int32_t>(same.begin(), same.begin() + static_cast<std::ptrdiff_t>(count)) != want)
          return fmt::format("recv == send: wrong result at count {}", count);
      }
      return "";
    });
  }

  TEST_CASE("allreduce and broadcast with send == recv") {
    for (const char* transport : kTransports) {
      CAPTURE(transport);
      check_all(run_ranks(3, transport, [](dtrain_comm_t comm, int rank, int n) -> std::string {
        std::vector<float> buf(1000);
        for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(rank + static_cast<int>(i % 7));
        if (auto st = dtrain_allreduce(comm, buf.data(), buf.data(), buf.size(), DTRAIN_FLOAT32, DTRAIN_SUM, nullptr))
          return status_text(st, "allreduce");
        for (std::size_t i = 0; i < buf.size(); ++i)
          if (buf[i] != static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7))) return "allreduce: wrong result";
        std::vector<std::int32_t> b(777, rank == 1 ? 42 : -1);
        if (auto st = dtrain_broadcast(comm, b.data(), b.data(), b.size(), DTRAIN_INT32, 1, nullptr))
          return status_text(st, "broadcast");
        for (std::int32_t v : b)
          if (v != 42) return "broadcast: wrong result";
        return "";
      }));
    }
  }

  TEST_CASE("any other overlap is refused on every rank with DTRAIN_ERR_INVALID_ARGUMENT, and the communicator stays usable") {
    check_all(run_ranks(2, "auto", [](dtrain_comm_t comm, int rank, int) -> std::string {
      std::vector<std::int32_t> buf(64, rank);
      auto refused = [&](dtrain_status_t st, const char* what, const char* fragment) -> std::string {
        if (st != DTRAIN_ERR_INVALID_ARGUMENT) return fmt::format("{}: status {}, want invalid argument", what, static_cast<int>(st));
        if (std::string(dtrain_last_error()).find(fragment) == std::string::npos)
          return fmt::format("{}: message '{}' lacks '{}'", what, dtrain_last_error(), fragment);
        return "";
      };
      std::string e;
      if (!(e = refused(dtrain_allgather(comm, buf.data() + 1, buf.data(), 8, DTRAIN_INT32, nullptr), "allgather",
                        "neither recvbuf + rank*sendcount")).empty())
        return e;
      if (!(e = refused(dtrain_reduce_scatter(comm, buf.data(), buf.data() + 3, 8, DTRAIN_INT32, DTRAIN_SUM, nullptr),
                        "reduce_scatter", "neither sendbuf + rank*recvcount")).empty())
        return e;
      if (!(e = refused(dtrain_allreduce(comm, buf.data(), buf.data() + 2, 8, DTRAIN_INT32, DTRAIN_SUM, nullptr),
                        "allreduce", "overlap without being the same pointer")).empty())
        return e;
      // Nothing was started, so the ranks are still in step.
      std::vector<std::int32_t> out(2);
      std::int32_t mine = rank + 5;
      if (auto st = dtrain_allgather(comm, &mine, out.data(), 1, DTRAIN_INT32, nullptr)) return status_text(st, "allgather after");
      if (out[0] != 5 || out[1] != 6) return "allgather after the refusals: wrong result";
      return "";
    }));
  }
}
