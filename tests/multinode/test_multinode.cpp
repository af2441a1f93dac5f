// Multi-node jobs on loopback: 2-4 `dtrain launch` processes of the real binary (different
// --node-rank, one spec, a tokened store served by node 0's agent) become one job.
#include <doctest/doctest.h>

#include "multinode_util.hpp"

using namespace mn;

TEST_SUITE("agent::multinode") {

TEST_CASE("three agents on loopback become one job: global ranks and the env contract on every node") {
  Job j(3, 2, "exit 0");
  std::vector<Node> nodes;
  for (int i = 2; i >= 0; --i) nodes.push_back(j.node(i));  // node 0 last: the others wait for its store
  for (auto& n : nodes) CHECK_MESSAGE(finish(n, 60) == 0, err_of(n));
  std::set<std::string> master_ports;
  for (int rank = 0; rank < 6; ++rank) {
    auto e = env_file(j.t.path / fmt::format("env-{}-0", rank));
    CAPTURE(rank);
    CHECK(e["RANK"] == std::to_string(rank));
    CHECK(e["LOCAL_RANK"] == std::to_string(rank % 2));
    CHECK(e["WORLD_SIZE"] == "6");
    CHECK(e["DTRAIN_WORLD_SIZE"] == "6");
    CHECK(e["LOCAL_WORLD_SIZE"] == "2");
    CHECK(e["GROUP_RANK"] == std::to_string(rank / 2));
    CHECK(e["DTRAIN_NODE_RANK"] == std::to_string(rank / 2));
    CHECK(e["DTRAIN_NNODES"] == "3");
    CHECK(e["MASTER_ADDR"] == "127.0.0.1");
    CHECK(e["DTRAIN_STORE_ADDR"] == fmt::format("127.0.0.1:{}", j.port));
    CHECK(e["DTRAIN_STORE_TOKEN"] == j.token);
    CHECK(e["DTRAIN_LOCAL_ADDR"] == "127.0.0.1");
    CHECK(e["DTRAIN_GENERATION"] == "0");
    CHECK(!e["MASTER_PORT"].empty());
    master_ports.insert(e["MASTER_PORT"] + "/" + e["DTRAIN_RUN_ID"]);
  }
  CHECK(master_ports.size() == 1);  // one MASTER_PORT and one run id for the whole job
}

TEST_CASE("the workers' collectives bootstrap through node 0's store across agents") {
  const fs::path worker = allreduce_worker();
  Job j(2, 2, fmt::format("exec '{}' --count 1000 --iters 2", worker.string()));
  Node n1 = j.node(1), n0 = j.node(0);
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  std::string out = agent_test::slurp(n0.out) + agent_test::slurp(n1.out);
  for (int r = 0; r < 4; ++r) CHECK_MESSAGE(out.find(fmt::format("rank {}/4 ok", r)) != std::string::npos, out);
}

TEST_CASE("collectives across agents after a restart: generation 1 bootstraps from fresh keys") {
  const fs::path worker = allreduce_worker();
  // rank 2 (node 1) kills itself in the middle of generation 0; generation 1 runs clean
  Job j(2, 2,
        fmt::format("if [ \"$DTRAIN_GENERATION\" = 0 ]; then exec '{0}' --count 1000 --iters 3 --die-rank 2 --die-at 1; "
                    "fi; exec '{0}' --count 1000 --iters 2",
                    worker.string()),
        R"(, "restart": {"max_restarts": 1})");
  Node n1 = j.node(1), n0 = j.node(0);
  CHECK_MESSAGE(finish(n0, 90) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 90) == 0, err_of(n1));
  std::string out = agent_test::slurp(n0.out) + agent_test::slurp(n1.out);
  for (int r = 0; r < 4; ++r) CHECK_MESSAGE(out.find(fmt::format("rank {}/4 ok", r)) != std::string::npos, out);
  for (int r = 0; r < 4; ++r) CHECK(j.have_env(r, 1));
}

TEST_CASE("a worker failure on node 1 stops node 0; both exit with the root cause's code") {
  // rank 2 fails once every worker of the job runs
  Job j(2, 2, "if [ \"$RANK\" = 2 ]; then for r in 0 1 3; do await \"$T/env-$r-0\"; done; exit 3; fi; exec sleep 60");
  Node n0 = j.node(0), n1 = j.node(1);
  CHECK_MESSAGE(finish(n1, 60) == 3, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 3, err_of(n0));
  std::string e0 = err_of(n0);
  CHECK_MESSAGE(e0.find("node 1") != std::string::npos, e0);  // node 0's summary names the root cause
  CHECK_MESSAGE(e0.find("rank 2 exited with code 3") != std::string::npos, e0);
  CHECK(j.no_workers_left());
}

TEST_CASE("a command that cannot run on node 1: every node exits 127 with that cause, restarts or not") {
  Job j(2, 1, "exec sleep 60", R"(, "restart": {"max_restarts": 2})");
  Node n0 = j.node(0);
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  ::setenv("PATH", "/nonexistent", 1);  // node 1 finds no `sh`
  Node n1 = j.node(1);
  ::setenv("PATH", path.c_str(), 1);
  CHECK_MESSAGE(finish(n1, 60) == 127, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 127, err_of(n0));
  std::string e0 = err_of(n0);
  CHECK_MESSAGE(e0.find("node 1") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("command not found") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("lost") == std::string::npos, e0);
  CHECK(j.no_workers_left());
}

TEST_CASE("an agent that cannot start on node 1 (no such workdir): every node exits 2 with its message") {
  Job j(2, 1, "exec sleep 60", R"(, "restart": {"max_restarts": 2})");
  Node n0 = j.node(0), n1 = j.node(1, {"--set", "/workdir=/nonexistent/dtrain-test"});
  CHECK_MESSAGE(finish(n1, 60) == 2, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 2, err_of(n0));
  std::string e0 = err_of(n0);
  CHECK_MESSAGE(e0.find("node 1") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("workdir '/nonexistent/dtrain-test'") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("lost") == std::string::npos, e0);
  CHECK(j.no_workers_left());
}

TEST_CASE("a dedicated `dtrain rendezvous serve` host: node 0 joins it instead of serving") {
  Job j(2, 1, "exit 0");
  std::vector<std::string> argv{DTRAIN_BIN, "rendezvous", "serve", "--listen", fmt::format("127.0.0.1:{}", j.port),
                                "--token-file", j.t / "token"};
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t serve = -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  std::string serve_err = j.t / "serve.err";
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, serve_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(posix_spawn(&serve, DTRAIN_BIN, &fa, nullptr, cargv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  // the agents retry a refused connection, but node 0 must find the address taken to not serve it
  REQUIRE(listening(j.port));
  Node n0 = j.node(0), n1 = j.node(1);
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  CHECK(env_file(j.t.path / "env-1-0")["RANK"] == "1");
  ::kill(serve, SIGTERM);
  CHECK(agent_test::wait_child(serve, 30) == 0);
}

TEST_CASE("node ranks not given: the agent on the endpoint's address serves, the rendezvous assigns ranks") {
  Job j(2, 2, "exit 0");
  Node a = start(j.t, "a", {j.job, "--no-progress"});
  Node b = start(j.t, "b", {j.job, "--no-progress"});
  CHECK_MESSAGE(finish(a, 60) == 0, err_of(a));
  CHECK_MESSAGE(finish(b, 60) == 0, err_of(b));
  std::set<std::string> groups;
  for (int rank = 0; rank < 4; ++rank) {
    auto e = env_file(j.t.path / fmt::format("env-{}-0", rank));
    CHECK(e["RANK"] == std::to_string(rank));
    CHECK(e["WORLD_SIZE"] == "4");
    groups.insert(e["GROUP_RANK"]);
  }
  CHECK(groups == std::set<std::string>{"0", "1"});
}

TEST_CASE("a failure on node 1 after node 0's workers finished: node 0 leaves the exit barrier with it") {
  // rank 1 fails once the rendezvous shows node 0 done (its workers finished, the exit barrier next)
  Job j(2, 1, "if [ \"$RANK\" = 1 ]; then await \"$T/go\"; exit 5; fi; exit 0");
  Node n0 = j.node(0), n1 = j.node(1);
  REQUIRE(j.wait_status([](const auto& st) { return Job::state_of(st, 0) == "done"; }));
  agent_test::write_file(j.t / "go", "");
  CHECK_MESSAGE(finish(n1, 60) == 5, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 5, err_of(n0));
  CHECK_MESSAGE(err_of(n0).find("rank 1 exited with code 5") != std::string::npos, err_of(n0));
}

TEST_CASE("a failure with a restart left: every node re-joins under generation 1 with a fresh MASTER_PORT") {
  Job j(2, 1, "if [ \"$RANK\" = 1 ] && [ \"$DTRAIN_GENERATION\" = 0 ]; then await \"$T/env-0-0\"; exit 4; fi; "
              "[ \"$DTRAIN_GENERATION\" = 1 ] && exit 0; exec sleep 60",
         R"(, "restart": {"max_restarts": 1})");
  Node n0 = j.node(0), n1 = j.node(1);
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    REQUIRE(j.have_env(rank, 0));
    REQUIRE(j.have_env(rank, 1));
    auto g0 = env_file(j.t.path / fmt::format("env-{}-0", rank));
    auto g1 = env_file(j.t.path / fmt::format("env-{}-1", rank));
    CHECK(g1["DTRAIN_GENERATION"] == "1");
    CHECK(g1["TORCHELASTIC_RESTART_COUNT"] == "1");
    CHECK(g1["RANK"] == std::to_string(rank));
    CHECK(g1["MASTER_PORT"] != g0["MASTER_PORT"]);
  }
  CHECK(env_file(j.t.path / "env-0-1")["MASTER_PORT"] == env_file(j.t.path / "env-1-1")["MASTER_PORT"]);
}

TEST_CASE("--master-port reaches every worker of every node exactly, in every generation") {
  Job j(2, 1, "if [ \"$RANK\" = 1 ] && [ \"$DTRAIN_GENERATION\" = 0 ]; then await \"$T/env-0-0\"; exit 4; fi; "
              "[ \"$DTRAIN_GENERATION\" = 1 ] && exit 0; exec sleep 60",
        R"(, "restart": {"max_restarts": 1})");
  int port = free_port();
  Node n0 = j.node(0, {"--master-port", std::to_string(port)}), n1 = j.node(1, {"--master-port", std::to_string(port)});
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  for (int gen = 0; gen < 2; ++gen)
    for (int rank = 0; rank < 2; ++rank) {
      CAPTURE(gen);
      CAPTURE(rank);
      CHECK(env_file(j.t.path / fmt::format("env-{}-{}", rank, gen))["MASTER_PORT"] == std::to_string(port));
    }
}

TEST_CASE("SIGINT while re-joining for a restart: the agent exits 130 at once, nothing left waiting") {
  // node 1 sits in a long backoff after its failure, so node 0 waits in the join of generation 1
  Job j(2, 1, "if [ \"$RANK\" = 1 ] && [ \"$DTRAIN_GENERATION\" = 0 ]; then await \"$T/env-0-0\"; exit 4; fi; exec sleep 60",
        R"(, "restart": {"max_restarts": 1})");
  Node n0 = j.node(0), n1 = j.node(1, {"--set", "/restart/backoff_s=30"});
  // node 0 waits in the join barrier of generation 1, alone
  REQUIRE(j.wait_status([](const auto& st) { return st.generation == 1 && st.joined == 1; }));
  auto t0 = std::chrono::steady_clock::now();
  ::kill(n0.pid, SIGINT);
  CHECK_MESSAGE(finish(n0, 20) == 130, err_of(n0));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  ::kill(n1.pid, SIGTERM);
  CHECK_MESSAGE(finish(n1, 30) == 143, err_of(n1));
  CHECK(j.no_workers_left());
}

TEST_CASE("an agent SIGKILLed: the others exit with node_lost (69) naming it, and no worker survives") {
  Job j(4, 1, "exec sleep 60");
  Node n0 = j.node(0), n1 = j.node(1), n2 = j.node(2), n3 = j.node(3);
  REQUIRE(agent_test::wait_until([&] {
    return j.have_env(0, 0) && j.have_env(1, 0) && j.have_env(2, 0) && j.have_env(3, 0);
  }, 40));
  ::kill(n1.pid, SIGKILL);
  CHECK(finish(n1, 10) == 128 + SIGKILL);
  CHECK_MESSAGE(finish(n0, 30) == 69, err_of(n0));
  CHECK_MESSAGE(finish(n2, 30) == 69, err_of(n2));
  CHECK_MESSAGE(finish(n3, 30) == 69, err_of(n3));
  CHECK_MESSAGE(err_of(n0).find("node 1") != std::string::npos, err_of(n0));
  CHECK_MESSAGE(err_of(n2).find("node 1") != std::string::npos, err_of(n2));
  CHECK(j.no_workers_left());
}

TEST_CASE("node 0's agent SIGKILLed: the others lose the rendezvous and exit with node_lost (69)") {
  Job j(2, 1, "exec sleep 60");
  Node n0 = j.node(0), n1 = j.node(1);
  REQUIRE(agent_test::wait_until([&] { return j.have_env(0, 0) && j.have_env(1, 0); }, 40));
  ::kill(n0.pid, SIGKILL);
  CHECK(finish(n0, 10) == 128 + SIGKILL);
  CHECK_MESSAGE(finish(n1, 30) == 69, err_of(n1));
  CHECK_MESSAGE(err_of(n1).find("rendezvous") != std::string::npos, err_of(n1));
  CHECK(j.no_workers_left());
}

TEST_CASE("a wrong token is refused with 77; the job waits for the right node") {
  Job j(2, 1, "exit 0");
  agent_test::write_file(j.t / "bad", "not-the-token-0123456789abcdef\n");
  fs::permissions(j.t / "bad", fs::perms(0600));
  Node n0 = j.node(0);
  Node bad = start(j.t, "bad", j.args(1, {"--token-file", j.t / "bad"}));
  CHECK_MESSAGE(finish(bad, 60) == 77, err_of(bad));
  CHECK_MESSAGE(err_of(bad).find("token") != std::string::npos, err_of(bad));
  Node n1 = j.node(1);
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
}

TEST_CASE("a duplicate node rank is refused with a named error (2); the right node still completes the job") {
  Job j(2, 1, "exit 0");
  Node n0 = j.node(0);
  REQUIRE(listening(j.port));  // node 0 serves; the duplicate must find the address taken
  // Node 0 joins its own rendezvous a moment after it listens; a duplicate that came in between would
  // take rank 0 first and the real node 0 would be the one refused. Start it once node 0 is in.
  REQUIRE(j.wait_status([](const auto& st) { return st.joined == 1; }));
  Node dup = start(j.t, "dup", j.args(0));
  CHECK_MESSAGE(finish(dup, 60) == 2, err_of(dup));
  CHECK_MESSAGE(err_of(dup).find("node rank 0") != std::string::npos, err_of(dup));
  Node n1 = j.node(1);
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
}

TEST_CASE("join timeout: 75, naming the node that never came") {
  Job j(3, 1, "exit 0");
  // node 0 shows the waiting line (--progress: one line per change when stderr is not a terminal)
  Node n0 = start(j.t, "node0", {j.job, "--node-rank", "0", "--progress", "--set", "/rendezvous/join_timeout_s=4"});
  Node n1 = j.node(1, {"--set", "/rendezvous/join_timeout_s=4"});
  CHECK_MESSAGE(finish(n0, 60) == 75, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 75, err_of(n1));
  std::string e0 = err_of(n0);
  CHECK_MESSAGE(e0.find("timed out") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("missing: node 2") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("dtrain: waiting for nodes ") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("/3 (missing: ") != std::string::npos, e0);
}

TEST_CASE("a multi-node job without a token is refused (2) unless --insecure") {
  Job j(2, 1, "exit 0");
  std::string spec = agent_test::slurp(j.job);
  auto a = spec.find("\"token_file\"");
  auto b = spec.find(',', a);
  spec.erase(a, b - a + 1);
  agent_test::write_file(j.job, spec);
  Node n = j.node(0);
  CHECK_MESSAGE(finish(n, 30) == 2, err_of(n));
  CHECK_MESSAGE(err_of(n).find("--insecure") != std::string::npos, err_of(n));
  Node n1 = j.node(1, {"--insecure"}), n0 = j.node(0, {"--insecure"});
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
}

}  // TEST_SUITE
