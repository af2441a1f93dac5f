#pragma once
// Ranks as threads over an in-memory store: each thread builds its own Communicator and runs `body`.
// Errors are collected per rank and returned (doctest asserts stay on the main thread); status_of()
// and no_errors() read them.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm.hpp"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::test {

// Every dtype of the C ABI.
inline constexpr dtrain_dtype_t kAllDtypes[] = {DTRAIN_INT8,    DTRAIN_UINT8,    DTRAIN_INT32,   DTRAIN_INT64,
                                                DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64};

struct World {
  int size = 1;
  int local_size = -1;  // -1: one node
  std::string transport = "auto";
  std::chrono::milliseconds timeout{60000};
  std::string run_id = "test";
  std::size_t slot_bytes = 1 << 20;
};

// A world of `size` ranks on one host with the engine `transport` picks (auto | tcp) and a deadline.
inline World world_of(int size, const char* transport, std::chrono::milliseconds timeout) {
  World w;
  w.size = size;
  w.transport = transport;
  w.timeout = timeout;
  return w;
}

inline CommConfig config_for(const World& w, int r) {
  CommConfig c;
  c.rank = r;
  c.size = w.size;
  c.local_size = w.local_size;
  c.local_rank = w.local_size > 0 ? r % w.local_size : -1;
  c.transport = w.transport;
  c.timeout = w.timeout;
  c.run_id = w.run_id;
  c.advertise = "127.0.0.1";
  c.shm_slot_bytes = w.slot_bytes;
  c.tcp_chunk_bytes = 256 * 1024;
  c.spin_us = 20;
  return c;
}

// Runs body(comm, rank) on w.size threads; returns each rank's exception text ("" when fine).
inline std::vector<std::string> run_ranks(const World& w, const std::function<void(Communicator&, int)>& body) {
  auto store = rdzv::make_memory_store();
  std::vector<std::string> errors(static_cast<std::size_t>(w.size));
  std::vector<std::thread> threads;
  for (int r = 0; r < w.size; ++r)
    threads.emplace_back([&, r] {
      try {
        Communicator comm(config_for(w, r), store);
        body(comm, r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// Runs f and returns the CollError status it threw (SUCCESS when none) and its text.
template <class F>
std::pair<dtrain_status_t, std::string> status_of(F&& f) {
  try {
    f();
    return {DTRAIN_SUCCESS, ""};
  } catch (const CollError& e) {
    return {e.status(), e.what()};
  }
}

// Checks that no rank of run_ranks() threw.
inline void no_errors(const std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    CAPTURE(r);
    CHECK(errors[r] == "");
  }
}

// The worlds of n ranks on each multi-rank engine: shared memory, TCP and, for an even n of 4 or
// more, hierarchical (two ranks a host).
inline std::vector<World> engine_worlds(int n) {
  World shm;
  shm.size = n;
  World tcp = shm;
  tcp.transport = "tcp";
  std::vector<World> out{shm, tcp};
  if (n >= 4 && n % 2 == 0) {
    World hier = shm;
    hier.local_size = 2;
    out.push_back(hier);
  }
  return out;
}

}  // namespace dtrain::coll::test

// The names every harness test uses (this header is included by test files only).
using namespace dtrain::coll;
using dtrain::coll::test::kAllDtypes;
using dtrain::coll::test::engine_worlds;
using dtrain::coll::test::no_errors;
using dtrain::coll::test::run_ranks;
using dtrain::coll::test::status_of;
using dtrain::coll::test::World;
using dtrain::coll::test::world_of;
using namespace std::chrono_literals;
