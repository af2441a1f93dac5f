// The straggler report across nodes (agent/src/progress_watch.cpp, the figures shared with the
// heartbeats: rendezvous/membership/src/heartbeat.cpp): two `dtrain launch` nodes on loopback, one
// worker each (examples/c_allreduce), rank 1 (node 1) 50 ms slow per iteration. Neither node can see
// it from its own page alone; with the other node's figures both name it, live and at the end.
#include <doctest/doctest.h>

#include <cstdlib>

#include "../cli/run_binary.hpp"
#include "multinode_util.hpp"

using namespace mn;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("agent::multinode_stragglers") {

TEST_CASE("rank 1 on node 1 is 50 ms slow a step: both nodes' dtrain status and summaries name it, all 2 nodes") {
  Job j(2, 1, fmt::format("exec '{}' --count 1000 --iters 150 --slow-rank 1 --slow-us 50000",
                          allreduce_worker().string()));
  ::setenv("TMPDIR", j.t.path.c_str(), 1);  // the nodes' registry of runs, which dtrain status reads
  auto env = dtrain::test::base_env();
  env["TMPDIR"] = j.t.path.string();
  Node n0 = j.node(0), n1 = j.node(1);
  const std::string named = "all 2 nodes, 2 ranks): slowest rank 1 kept the others waiting ";
  std::string out;
  bool seen = agent_test::wait_until([&] {
    out = dtrain::test::run({DTRAIN_BIN, "status"}, env).out;
    return count(out, named) == 2;  // each node's run, with the other node's figures
  }, 60);
  CHECK_MESSAGE(seen, out);
  int rc0 = finish(n0, 90), rc1 = finish(n1, 90);
  std::string e0 = err_of(n0), e1 = err_of(n1);
  CAPTURE(e0);
  CAPTURE(e1);
  CHECK(rc0 == 0);
  CHECK(rc1 == 0);
  for (const auto* e : {&e0, &e1}) {
    CHECK(has(*e, "dtrain: stragglers (the whole run, "));
    CHECK(has(*e, named));
  }
  // the node that has the rank warns; the other does not repeat it
  CHECK(has(e1, "dtrain: warning: straggler: rank 1 kept the others waiting "));
  CHECK_FALSE(has(e0, "warning: straggler"));
  CHECK(j.no_workers_left());
}

}
