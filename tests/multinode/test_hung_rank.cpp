// A rank that stops making progress is the root cause on every node: two `dtrain launch` nodes on
// loopback, 2 workers each (examples/c_allreduce), rank 3 SIGSTOPped mid-run, many times over
// (DTRAIN_STOP_RUNS, default 3). Both nodes name rank 3, stopped, and end as hung (70) by the hang
// rule, without output.hang_timeout_s, before the survivors' collectives give up (their timeout is
// long: a run that waited for it would end with a survivor's timeout as the root cause, not 70).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>

#include "dtrain/agent/hang.hpp"
#include "multinode_util.hpp"

using namespace mn;

namespace {

int stop_runs() {
  const char* v = std::getenv("DTRAIN_STOP_RUNS");
  int n = v ? std::atoi(v) : 3;
  return n > 0 ? n : 3;
}

nlohmann::json summary_of(const Job& j, int node) {
  return nlohmann::json::parse(agent_test::slurp(j.t / fmt::format("summary{}.json", node)), nullptr, false);
}

// The calls rank `rank` made so far, from its progress page (named in its env dump).
std::uint64_t calls_of(const Job& j, int rank) {
  auto env = env_file(j.t / fmt::format("env-{}-0", rank));
  fs::path page = env["DTRAIN_PROGRESS_FILE"];
  for (const auto& r : dtrain::agent::read_progress(page.parent_path()))
    if (page.filename() == fmt::format("progress-{}", r.rank)) return r.page.calls;
  return 0;
}

}  // namespace

TEST_SUITE("agent::multinode_hung_rank") {

TEST_CASE("rank 3 SIGSTOPped: both nodes name it, stopped, and end as hung (70), run after run") {
  const int runs = stop_runs();
  for (int run = 0; run < runs; ++run) {
    CAPTURE(run);
    Job j(2, 2, fmt::format("echo $$ > \"$T/pid-$RANK\"; export DTRAIN_COLL_TIMEOUT_S=60; exec '{}' --count 1000 --iters 100000000",
                            allreduce_worker().string()));
    Node n0 = j.node(0, {"--summary-json", j.t / "summary0.json"});
    Node n1 = j.node(1, {"--summary-json", j.t / "summary1.json"});
    REQUIRE(j.all_env(4, 0));
    REQUIRE(agent_test::wait_until([&] { return calls_of(j, 3) > 20; }, 30));  // mid-run
    pid_t pid = std::stoi(agent_test::slurp(j.t / "pid-3"));
    auto stopped = std::chrono::steady_clock::now();
    REQUIRE(::kill(pid, SIGSTOP) == 0);
    int rc0 = finish(n0, 90), rc1 = finish(n1, 90);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
    std::string e0 = err_of(n0), e1 = err_of(n1);
    CAPTURE(e0);
    CAPTURE(e1);
    CHECK(rc0 == 70);
    CHECK(rc1 == 70);
    auto s0 = summary_of(j, 0), s1 = summary_of(j, 1);
    REQUIRE(s0.is_object());
    REQUIRE(s1.is_object());
    for (const auto* s : {&s0, &s1}) {
      CHECK((*s)["root_cause"]["rank"] == 3);
      CHECK((*s)["root_cause"]["pid"] == pid);
      CHECK((*s)["root_cause"]["hang"]["state"] == "T stopped");
      CHECK((*s)["root_cause"]["description"].get<std::string>().rfind("hung (state T stopped): ", 0) == 0);
    }
    // node 1 saw rank 2 wait for it; node 0 heard of it through the rendezvous
    CHECK(s1["root_cause"]["hang"]["where"].get<std::string>().find("rank 2 waits in it") != std::string::npos);
    CHECK(s0["root_cause"]["remote"] == true);
    CHECK(e0.find("root cause: rank 3 (local rank 1, node 1") != std::string::npos);
    CHECK(e1.find("root cause: rank 3 (local rank 1, node 1, pid ") != std::string::npos);
    CHECK(e1.find("hang: rank 3 (pid ") != std::string::npos);
    // each node dumped its ranks' stacks: native workers, so none, and it says why
    for (const auto* s : {&s0, &s1})
      CHECK((*s)["stack_summary"].dump().find(": no stack: not a Python worker") != std::string::npos);
    // no survivor timed out: each was stopped by dtrain, or its collectives saw a peer stopped so fail
    for (const auto* s : {&s0, &s1})
      for (const auto& w : (*s)["other_failures"]) CHECK((w["stopped_by_agent"] == true || w["peer_failure"].is_number()));
    MESSAGE(fmt::format("run {}: both nodes ended {:.1f} s after the stop", run, took));
    CHECK(j.no_workers_left());
  }
}

}
