// `dtrain status --stacks --rdzv` from outside the job: two `dtrain launch` nodes on loopback, two
// Python workers each, every one asleep in a function of its script. Each node's agent dumps its
// ranks' stacks when the rendezvous asks (agent/src/control_thread.cpp, rendezvous stacks_desk.hpp);
// status shows all four ranks, node by node, in text and JSON. The store is authenticated: without
// the job's token status is refused and shows nothing.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "../cli/run_binary.hpp"
#include "multinode_util.hpp"
#include "test_needs.hpp"

using namespace mn;

namespace {

const dtrain::test::Need need_python("python", [] {
  std::string cmd = fmt::format("'{}' -c pass >/dev/null 2>&1", PYTHON_EXE);
  return std::system(cmd.c_str()) == 0 ? std::string() : fmt::format("no Python interpreter ('{}')", PYTHON_EXE);
});

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_SUITE("agent::multinode_stacks") {

TEST_CASE("dtrain status --stacks --rdzv shows every rank's Python stack from both nodes") {
  Job j(2, 2, fmt::format("exec '{}' \"$T/w.py\"", PYTHON_EXE));
  agent_test::write_file(j.t.path / "w.py", "import os, time\n\ndef wait_here():\n    time.sleep(120)\n\n"
                                            "open(os.path.join(os.environ['T'], 'up-' + os.environ['RANK']), 'w').close()\n"
                                            "wait_here()\n");
  Node n0 = j.node(0), n1 = j.node(1);
  REQUIRE(agent_test::wait_until([&] {
    for (int r = 0; r < 4; ++r)
      if (!std::filesystem::exists(j.t.path / fmt::format("up-{}", r))) return false;
    return true;
  }, 60));
  const std::string rdzv = fmt::format("127.0.0.1:{}", j.port);
  auto env = dtrain::test::base_env();  // no DTRAIN_RDZV_TOKEN: the token comes from the file
  dtrain::test::Result r;
  bool all = agent_test::wait_until([&] {
    r = dtrain::test::run({DTRAIN_BIN, "status", "--stacks", "--rdzv", rdzv, "--token-file", j.t / "token"}, env, 60);
    return r.status == 0 && has(r.out, "ranks 0-1: time.sleep(120) at w.py:4 in wait_here") &&
           has(r.out, "ranks 2-3: time.sleep(120) at w.py:4 in wait_here");
  }, 60);
  CHECK_MESSAGE(all, (r.out + r.err));
  for (int n = 0; n < 2; ++n)  // each node's section, its ranks' summary first
    CHECK_MESSAGE(has(r.out, fmt::format("node {} ({}), Python stacks (each rank's main thread; all threads below):\n"
                                         "    ranks {}-{}: ", n, host_name(), 2 * n, 2 * n + 1)), r.out);
  for (int rank = 0; rank < 4; ++rank) CHECK_MESSAGE(has(r.out, fmt::format("  rank {} (pid ", rank)), r.out);
  CHECK_MESSAGE(has(r.out, "File \"" + (j.t.path / "w.py").string() + "\", line 7 in <module>"), r.out);
  CHECK_MESSAGE(!has(r.out, "no answer"), r.out);

  auto js = dtrain::test::run({DTRAIN_BIN, "status", "--stacks", "--json", "--rdzv", rdzv, "--token-file", j.t / "token"},
                              env, 60);
  REQUIRE(js.status == 0);
  auto doc = nlohmann::json::parse(js.out, nullptr, false);
  REQUIRE(doc.is_object());
  const auto& nodes = doc["runs"][0]["node_stacks"];
  REQUIRE(nodes.size() == 2);
  for (int n = 0; n < 2; ++n) {
    CAPTURE(n);
    CHECK(nodes[n]["node_rank"] == n);
    CHECK(nodes[n]["answered"] == true);
    CHECK(nodes[n]["summary"][0] == fmt::format("ranks {}-{}: time.sleep(120) at w.py:4 in wait_here", 2 * n, 2 * n + 1));
    CHECK(has(nodes[n]["stacks"].dump(), fmt::format("rank {} (pid ", 2 * n + 1)));
  }

  // the job's store wants the job's token
  agent_test::write_file(j.t.path / "wrong", std::string(32, 'x') + "\n");
  std::filesystem::permissions(j.t.path / "wrong", std::filesystem::perms(0600));
  auto refused = dtrain::test::run({DTRAIN_BIN, "status", "--stacks", "--rdzv", rdzv, "--token-file", j.t / "wrong"}, env, 60);
  CHECK(refused.status == 77);
  CHECK_MESSAGE(!has(refused.out, "wait_here"), refused.out);

  ::kill(n0.pid, SIGTERM);
  ::kill(n1.pid, SIGTERM);
  CHECK(finish(n0, 60) == 143);
  finish(n1, 60);
  CHECK(j.no_workers_left());
}

}
