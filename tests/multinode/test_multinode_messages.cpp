// The messages of a multi-node job, as each node prints them: the waiting line, a node that stops on
// its own (Ctrl-C, SIGTERM, max_runtime_s), the remote root cause with its stderr tail, nodes whose
// jobs differ, a clean run's one line.
#include <doctest/doctest.h>

#include <netdb.h>

#include "../cli/run_binary.hpp"
#include "multinode_util.hpp"

using namespace mn;

TEST_SUITE("agent::multinode::messages") {

TEST_CASE("SIGTERM to node 0's agent: every node exits 143, told that node 0 was terminated, not lost") {
  Job j(2, 1, "exec sleep 60");
  Node n0 = j.node(0), n1 = j.node(1);
  REQUIRE(agent_test::wait_until([&] { return j.have_env(0, 0) && j.have_env(1, 0); }, 40));
  ::kill(n0.pid, SIGTERM);
  CHECK_MESSAGE(finish(n0, 30) == 143, err_of(n0));
  CHECK_MESSAGE(finish(n1, 30) == 143, err_of(n1));
  std::string e1 = err_of(n1);
  CHECK_MESSAGE(e1.find("node 0 (") != std::string::npos, e1);
  CHECK_MESSAGE(e1.find(") interrupted (SIGTERM)") != std::string::npos, e1);
  CHECK_MESSAGE(e1.find("lost") == std::string::npos, e1);
  CHECK(j.no_workers_left());
}

TEST_CASE("Ctrl-C on node 1: the others report \"node 1 interrupted (SIGINT)\" once and exit 130") {
  Job j(3, 1, "exec sleep 60");
  Node n0 = j.node(0), n1 = j.node(1), n2 = j.node(2);
  REQUIRE(agent_test::wait_until([&] { return j.have_env(0, 0) && j.have_env(1, 0) && j.have_env(2, 0); }, 40));
  ::kill(n1.pid, SIGINT);
  CHECK_MESSAGE(finish(n1, 30) == 130, err_of(n1));
  CHECK_MESSAGE(finish(n0, 30) == 130, err_of(n0));
  CHECK_MESSAGE(finish(n2, 30) == 130, err_of(n2));
  for (Node* n : {&n0, &n2}) {
    std::string e = err_of(*n);
    INFO(e);
    std::string event = ") interrupted (SIGINT)";
    auto first = e.find(event);
    REQUIRE(first != std::string::npos);
    CHECK(e.rfind("node 1 (", first) != std::string::npos);
    CHECK(e.find("stopping the local workers") != std::string::npos);
    CHECK(e.find(event, first + 1) == e.rfind(event));  // the event, then the summary's cause: no repeats
    CHECK(e.find("lost") == std::string::npos);
  }
  CHECK(j.no_workers_left());
}

TEST_CASE("max_runtime_s on one node: the others stop with it (124), not as a lost node") {
  Job j(2, 1, "exec sleep 60");
  Node n0 = j.node(0), n1 = j.node(1, {"--set", "/max_runtime_s=1"});  // counted from the job's start, once joined
  CHECK_MESSAGE(finish(n1, 60) == 124, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 124, err_of(n0));
  CHECK_MESSAGE(err_of(n0).find("stopped: max_runtime_s 1 passed") != std::string::npos, err_of(n0));
  CHECK_MESSAGE(err_of(n0).find("lost") == std::string::npos, err_of(n0));
}

TEST_CASE("the remote root cause carries the failing rank's stderr tail") {
  Job j(2, 1, "if [ \"$RANK\" = 1 ]; then i=0; while [ $i -lt 30 ]; do echo \"noise $i\" >&2; i=$((i+1)); done; "
              "echo 'Traceback: ValueError: bad shape (1, 2)' >&2; await \"$T/env-0-0\"; exit 3; fi; exec sleep 60");
  Node n0 = j.node(0), n1 = j.node(1);
  CHECK_MESSAGE(finish(n1, 60) == 3, err_of(n1));
  CHECK_MESSAGE(finish(n0, 60) == 3, err_of(n0));
  std::string e0 = err_of(n0);
  CHECK_MESSAGE(e0.find("rank 1 exited with code 3") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("last lines of its stderr:") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("    | Traceback: ValueError: bad shape (1, 2)") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("| noise 29") != std::string::npos, e0);
  CHECK_MESSAGE(e0.find("| noise 5\n") == std::string::npos, e0);  // bounded: the last lines only
}

// The repeat (JoinLine::kRepeat, 5 s) is the time under test here.
TEST_CASE("a node that is not node 0 says at once, and every few seconds, that it waits for the rendezvous") {
  Job j(2, 1, "exit 0");
  Node n1 = start(j.t, "node1", {j.job, "--node-rank", "1"});  // the default: shown, as lines when not a terminal
  std::string want = fmt::format("dtrain: waiting for the rendezvous at 127.0.0.1:{} (not reachable yet) ", j.port);
  CHECK_MESSAGE(agent_test::wait_until([&] { return err_of(n1).find(want) != std::string::npos; }, 10), err_of(n1));
  CHECK_MESSAGE(agent_test::wait_until([&] {
    std::string e = err_of(n1);
    auto first = e.find(want);
    return first != std::string::npos && e.find(want, first + 1) != std::string::npos;
  }, 15), err_of(n1));
  Node n0 = j.node(0);
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
}

TEST_CASE("a rendezvous host name that does not resolve is named at once; one the resolver does not know ends with 2") {
  Job j(2, 1, "exit 0");
  const std::string host = "dtrain-no-such-host.invalid";  // RFC 2606: never resolves
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int answer = ::getaddrinfo(host.c_str(), "29400", &hints, &res);
  if (res != nullptr) ::freeaddrinfo(res);
  REQUIRE(answer != 0);
  const auto t0 = std::chrono::steady_clock::now();
  Node n1 = start(j.t, "node1", {j.job, "--node-rank", "1", "--rdzv", fmt::format("{}:{}", host, j.port)});
  const std::string want = fmt::format("dtrain: waiting for the rendezvous at {}:{} (the name '{}' does not resolve",
                                       host, j.port, host);
  CHECK_MESSAGE(agent_test::wait_until([&] { return err_of(n1).find(want) != std::string::npos; }, 10), err_of(n1));
  if (answer == EAI_NONAME || answer == EAI_FAIL) {
    CHECK_MESSAGE(finish(n1, 40) == 2, err_of(n1));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    CHECK_MESSAGE(err_of(n1).find("check the host name (MASTER_ADDR, --rdzv") != std::string::npos, err_of(n1));
  } else {  // a temporary resolver failure is tried until join_timeout_s
    CAPTURE(answer);
    ::kill(n1.pid, SIGTERM);
    CHECK_MESSAGE(finish(n1, 30) == 143, err_of(n1));
  }
}

TEST_CASE("a clean run: one summary line on each node, no warning") {
  Job j(2, 2, "exit 0");
  Node n0 = j.node(0), n1 = j.node(1);
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  for (Node* n : {&n0, &n1}) {
    auto lines = agent_test::lines_of(err_of(*n));
    INFO(err_of(*n));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("dtrain: job finished: 4 ranks (2 on this node) exited 0 in ", 0) == 0);
  }
}

TEST_CASE("nodes whose jobs differ: every node exits 2 at once, naming the fields and values") {
  Job j(2, 1, "exit 0");
  Node n0 = j.node(0);
  REQUIRE(listening(j.port));
  auto t0 = std::chrono::steady_clock::now();
  Node n1 = j.node(1, {"--nproc-per-node", "2", "--set", "/batch={\"per_replica\": 4}"});
  CHECK_MESSAGE(finish(n1, 30) == 2, err_of(n1));
  CHECK_MESSAGE(finish(n0, 30) == 2, err_of(n0));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));  // not the join timeout (40 s)
  for (Node* n : {&n0, &n1}) {
    std::string e = err_of(*n);
    INFO(e);
    CHECK(e.find("spec mismatch between node 0 (") != std::string::npos);
    CHECK(e.find("procs_per_instance: '1' on node 0 (") != std::string::npos);
    CHECK(e.find("'2' on node 1 (") != std::string::npos);
    CHECK(e.find("batch: 'none' on node 0") != std::string::npos);
    CHECK(e.find("'global 16, micro_batches 1, epochs 1' on node 1") != std::string::npos);
  }
}

TEST_CASE("dtrain status --rdzv shows where each node's ranks are; a hang on one node stops every node with 70") {
  const fs::path worker = allreduce_worker();
  // rank 1 (node 1) stops calling in iteration 2; rank 0 waits in its allreduce (call 13)
  Job j(2, 1, fmt::format("exec '{}' --count 1000 --iters 4 --stall-rank 1 --stall-at 2", worker.string()),
        R"(, "output": {"hang_timeout_s": 4})");  // long enough for `dtrain status` to see the wait first
  Node n0 = j.node(0), n1 = j.node(1);
  std::string out;
  bool seen = agent_test::wait_until([&] {
    out = dtrain::test::run({DTRAIN_BIN, "status", "--rdzv", fmt::format("127.0.0.1:{}", j.port), "--token-file",
                             j.t / "token"}).out;
    return out.find("rank 0: in allreduce #13 (3.9 KiB) for ") != std::string::npos &&
           out.find("rank 1: last collective barrier #12 (0 B) returned ") != std::string::npos;
  }, 30);
  CHECK_MESSAGE(seen, out);
  CHECK_MESSAGE(out.find("node 0 (") != std::string::npos, out);
  CHECK_MESSAGE(out.find("), at its last heartbeat:") != std::string::npos, out);
  CHECK_MESSAGE(finish(n0, 60) == 70, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 70, err_of(n1));
  CHECK_MESSAGE(err_of(n0).find("hang: no progress for ") != std::string::npos, err_of(n0));
  CHECK_MESSAGE(err_of(n0).find("rank 0 waits in allreduce #13") != std::string::npos, err_of(n0));
  CHECK_MESSAGE(err_of(n1).find(") stopped: hang: no progress for ") != std::string::npos, err_of(n1));
  CHECK(j.no_workers_left());
}

}  // TEST_SUITE
