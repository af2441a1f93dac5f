#pragma once
// Communicators as ranks on threads (ranks.hpp) over an in-memory store: each thread builds its own
// Communicator of a World and runs `body`; status_of() reads what a call threw.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "calls.hpp"
#include "comm.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "ranks.hpp"

namespace dtrain::coll::test {

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
  return on_threads(w.size, [&](int r) {
    Communicator comm(config_for(w, r), store);
    body(comm, r);
  });
}

// As run_ranks, but each body owns its communicator (and may destroy it early: c.reset()).
inline std::vector<std::string> run_owned_ranks(const World& w,
                                                const std::function<void(std::unique_ptr<Communicator>&, int)>& body) {
  auto store = rdzv::make_memory_store();
  return on_threads(w.size, [&](int r) {
    auto comm = std::make_unique<Communicator>(config_for(w, r), store);
    body(comm, r);
  });
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
using dtrain::coll::test::on_threads;
using dtrain::coll::test::run_owned_ranks;
using dtrain::coll::test::run_ranks;
using dtrain::coll::test::status_of;
using dtrain::coll::test::wait_until;
using dtrain::coll::test::World;
using dtrain::coll::test::world_of;
using namespace std::chrono_literals;
