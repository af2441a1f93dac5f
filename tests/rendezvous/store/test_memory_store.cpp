// The in-memory store and TcpStore against a real server share one semantics (store_semantics.hpp).
#include <doctest/doctest.h>

#include "helpers.hpp"
#include "store_semantics.hpp"

using namespace rt;
using namespace dtrain::rdzv;

TEST_SUITE("rendezvous::memory_store") {
  TEST_CASE("the in-memory store") {
    auto store = make_memory_store();
    same_semantics([&] { return store; });
  }

  TEST_CASE("TcpStore against the server") {
    TestServer srv;
    same_semantics([&]() -> std::shared_ptr<Store> { return srv.connect(); });
  }
}
