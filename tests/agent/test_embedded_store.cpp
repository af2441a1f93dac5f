// The store the agent serves itself (agent/src/embedded_store.cpp): on loopback, a fresh token,
// this run id only; its thread starts with the first connection, which the agent's loop sees.
#include <doctest/doctest.h>

#include <thread>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/client.hpp"
#include "embedded_store.hpp"

using dtrain::agent::EmbeddedStore;
using dtrain::agent::EventLoop;
namespace rdzv = dtrain::rdzv;

namespace {

rdzv::ClientOptions client_of(const EmbeddedStore& s, const std::string& run_id, const std::string& token) {
  rdzv::ClientOptions c;
  auto colon = s.addr().rfind(':');
  c.host = s.addr().substr(0, colon);
  c.port = std::stoi(s.addr().substr(colon + 1));
  c.token = token;
  c.run_id = run_id;
  c.connect_timeout = std::chrono::milliseconds(20000);
  c.client_name = "test";
  return c;
}

}  // namespace

TEST_SUITE("agent::embedded_store") {
  TEST_CASE("served from the first connection on, for its run id and token only") {
    EventLoop loop;
    loop.open({});
    EmbeddedStore s;
    s.start(loop, "store-run");
    REQUIRE(s.started());
    CHECK(s.addr().rfind("127.0.0.1:", 0) == 0);
    CHECK(s.token().size() >= 32);
    std::string got, refused;
    std::thread worker([&] {
      auto store = rdzv::connect_store(client_of(s, "store-run", s.token()));
      store->set("k", rdzv::as_bytes("v"));
      got = rdzv::to_string(store->get("k", std::chrono::milliseconds(5000)));
      try {
        rdzv::connect_store(client_of(s, "another-run", s.token()));
      } catch (const dtrain::AuthError& e) {
        refused = e.what();
      }
    });
    loop.run();  // the first connection starts the server's thread and ends the watch: run() returns
    worker.join();
    CHECK(got == "v");
    CHECK_FALSE(refused.empty());
    s.stop();
    s.close_watch();
    CHECK(loop.close());
  }

  TEST_CASE("a store nobody connects to stops cleanly") {
    EventLoop loop;
    loop.open({});
    EmbeddedStore s;
    s.start(loop, "idle-run");
    s.close_watch();
    s.stop();
    CHECK(loop.close());
  }
}
