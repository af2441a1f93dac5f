#pragma once
// Communicators of the C ABI as ranks on threads (ranks.hpp), made one of the two ways a worker
// makes them: dtrain_comm_init through a real rendezvous server (ServerWorld), or
// dtrain_comm_init_config through a caller's store (StoreWorld, a CStore over an in-memory store).
// body(comm, rank) returns "" when fine, else what went wrong; a failed init is reported as such.
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "c_store.hpp"
#include "dtrain/collectives.h"
#include "dtrain/rendezvous/server/server.hpp"
#include "ranks.hpp"

namespace dtrain::coll::test {

using CBody = std::function<std::string(dtrain_comm_t, int)>;

struct ServerWorld {
  int size = 2;
  const char* transport = nullptr;  // NULL/"auto" or "tcp"
  double timeout_s = 60;
};

inline std::vector<std::string> run_c_ranks(const ServerWorld& w, const CBody& body) {
  static int run_counter = 0;
  const std::string run_id = fmt::format("c-ranks-{}-{}", ::getpid(), ++run_counter);
  rdzv::ServerOptions so;
  rdzv::Server server(so);
  server.start();
  auto errors = on_threads(w.size, [&](int r) -> std::string {
    dtrain_init_options_t o;
    dtrain_init_options_default(&o);
    o.rank = r;
    o.size = w.size;
    o.store_host = "127.0.0.1";
    o.store_port = server.port();
    o.run_id = run_id.c_str();
    o.timeout_s = w.timeout_s;
    o.transport = w.transport;
    dtrain_comm_t comm = nullptr;
    if (dtrain_comm_init(&o, &comm) != DTRAIN_SUCCESS) return fmt::format("init: {}", dtrain_last_error());
    std::string e = body(comm, r);
    dtrain_comm_destroy(comm);
    return e;
  });
  server.stop();
  return errors;
}

struct StoreWorld {
  int size = 2;
  const char* transport = nullptr;
  std::function<const char*(int)> host = [](int) -> const char* { return nullptr; };
  double timeout_s = 60;
};

inline std::vector<std::string> run_c_ranks(const StoreWorld& w, const CBody& body) {
  CStore store(rdzv::make_memory_store());
  return on_threads(w.size, [&](int r) -> std::string {
    dtrain_config_t cfg = DTRAIN_CONFIG_INITIALIZER;
    cfg.rank = r;
    cfg.size = w.size;
    cfg.store = &store.c;
    cfg.timeout_s = w.timeout_s;
    cfg.transport = w.transport;
    cfg.host = w.host(r);
    cfg.advertise = "127.0.0.1";
    cfg.name = "test group";
    dtrain_comm_t comm = nullptr;
    if (dtrain_comm_init_config(&cfg, &comm) != DTRAIN_SUCCESS) return std::string("init: ") + dtrain_last_error();
    std::string e = body(comm, r);
    dtrain_comm_destroy(comm);
    return e;
  });
}

}  // namespace dtrain::coll::test
