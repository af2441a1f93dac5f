// The root cause every node names (session_bridge.cpp's agreed_root and Settle, job_machine.cpp's
// local choice): a rank whose collectives saw a peer fail is not the root cause when that peer failed.
#include <doctest/doctest.h>

#include <csignal>

#include "event_log.hpp"
#include "job_machine.hpp"
#include "bridge_test.hpp"
#include "session_bridge.hpp"

using namespace dtrain::agent;
using namespace dtrain::agent::bridge;
using namespace bridge_test;
using std::chrono::milliseconds;
namespace rdzv = dtrain::rdzv;

namespace {

// rank 1 on node 0 saw rank 3 die (exit 14), then node 1 reports rank 3 (SIGKILL)
const rdzv::Event kSaw = failure(1, 0, 1, 14, 0, "local rank 1, pid 11 (its collectives saw rank 3 fail); last lines of its stderr:\n    | rank 3 (pid 9) died");
const rdzv::Event kKilled = failure(2, 1, 3, 0, SIGKILL, "local rank 1, pid 9");
const dtrain::config::JobSpec kJob;  // no restarts, the default grace

}  // namespace

TEST_SUITE("agent::root_cause") {
  TEST_CASE("agreed_root: the first failure of its own, in the rendezvous's order") {
    CHECK(agreed_root({kSaw, kKilled})->rank == 3);
    CHECK(agreed_root({kKilled, kSaw})->rank == 3);
    CHECK_FALSE(agreed_root({kSaw}));  // the peer's own report may still come
    rdzv::Event plain = failure(1, 1, 2, 3, 0, "local rank 0, pid 5; last lines of its stderr:\n    | ValueError: x");
    CHECK(agreed_root({plain, kKilled})->rank == 2);  // two failures of their own: the first
    CHECK(reported_peer_failure(kSaw.message) == 3);
    CHECK(reported_peer_failure("local rank 0, pid 1 (its collectives saw a peer fail)") == -1);
    CHECK_FALSE(reported_peer_failure(kKilled.message));
    CHECK_FALSE(reported_peer_failure("local rank 0, pid 1; last lines of its stderr:\n    | (its collectives saw rank 2 fail)"));
  }

  TEST_CASE("the rendezvous's root cause (dtrain status --rdzv) is the one the agents agree on") {
    rdzv::EventLog log(0);
    CHECK(log.root_cause() == nullptr);
    log.append(rdzv::EventKind::failure, kSaw);
    CHECK(log.root_cause()->rank == 1);  // nothing better yet
    log.append(rdzv::EventKind::failure, kKilled);
    CHECK(log.root_cause()->rank == 3);
    CHECK(log.events().front().root_cause);  // the first fatal event still ended the generation
    rdzv::EventLog other(0);
    rdzv::Event plain = failure(1, 1, 2, 3, 0, "local rank 0, pid 5");
    other.append(rdzv::EventKind::failure, plain);
    other.append(rdzv::EventKind::failure, kKilled);
    CHECK(other.root_cause()->rank == 2);
    CHECK(rdzv::saw_peer_fail(kSaw));
    CHECK_FALSE(rdzv::saw_peer_fail(kKilled));
  }

  TEST_CASE("a node whose own rank only saw a peer die waits for that peer's report, then names it") {
    auto b = joined();
    WorkerExit w = worker_exit(1, 14, 0, 101);
    w.peer_failure = 3;
    auto rep = only<Report>(b.on(LocalFailure{w, 0}));
    CHECK(rep.message.find("(its collectives saw rank 3 fail)") != std::string::npos);
    CHECK(b.on(JobEvent{kSaw, 0}).empty());  // our own report, back from the rendezvous
    CHECK(only<Settle>(b.on(AgentDone{14, ""})).limit == milliseconds(3000));
    auto end = only<End>(b.on(JobEvent{kKilled, 0}));
    CHECK(end.exit_code == 137);
    REQUIRE(end.root);
    CHECK(end.root->rank == 3);
    CHECK(end.root->node == 1);
  }

  TEST_CASE("the peer's failure came first: the node that hears of it ends with it, no wait") {
    auto b = joined();
    b.on(JobEvent{kKilled, 0});  // posts the peer failure to the agent
    b.on(JobEvent{kSaw, 0});
    auto end = only<End>(b.on(AgentDone{14, ""}));
    CHECK(end.exit_code == 137);
    CHECK(end.root->rank == 3);
  }

  TEST_CASE("nobody's own failure ever comes: after the wait, the first failure stands") {
    auto b = joined();
    b.on(JobEvent{kSaw, 0});
    only<Settle>(b.on(AgentDone{14, ""}));
    auto end = only<End>(b.on(SettleOver{}));
    CHECK(end.exit_code == 14);
    CHECK(end.root->rank == 1);
  }

  TEST_CASE("a stop or a loss that came first stands: no root cause among failures") {
    auto b = joined();
    rdzv::Event stop;
    stop.seq = 1;
    stop.kind = "stopped";
    stop.node = 1;
    stop.exit_code = 130;
    stop.message = "interrupted (SIGINT)";
    b.on(JobEvent{stop, 0});
    b.on(JobEvent{kKilled, 0});
    auto end = only<End>(b.on(AgentDone{130, ""}));
    CHECK(end.exit_code == 130);
    CHECK_FALSE(end.root);
  }

  TEST_CASE("a failure that led to a restart does not name the end of a later stop") {
    auto b = joined();
    b.on(LocalFailure{worker_exit(1, 4, 0, 101), 0});
    b.on(JobEvent{failure(1, kSelf, 1, 4, 0, "local rank 1, pid 101"), 0});
    b.on(AgentState{JobState::restarting, 0});
    auto end = only<End>(b.on(AgentDone{143, "interrupted by SIGTERM"}));
    CHECK(end.exit_code == 143);
    CHECK_FALSE(end.root);
  }

  TEST_CASE("remote_exit: the report's parts for the summary") {
    auto w = remote_exit(failure(3, 1, 3, 1, 0, "local rank 1, pid 812; first exception on its stderr:\n"
                                                "    | Traceback (most recent call last):\n    | ValueError: bad"));
    CHECK(w.remote);
    CHECK(w.rank == 3);
    CHECK(w.node_rank == 1);
    CHECK(w.host == "h1");
    CHECK(w.local_rank == 1);
    CHECK(w.pid == 812);
    CHECK(w.status() == 1);
    CHECK(w.report == std::vector<std::string>{"first exception on its stderr", "Traceback (most recent call last):",
                                               "ValueError: bad"});
    CHECK(remote_exit(kKilled).report.empty());
  }

  TEST_CASE("the report's first line carries the peer's failure; the exception's first line is kept") {
    WorkerExit w = worker_exit(1, 1, 0, 101);
    w.peer_failure = -1;
    w.first_exception = {"Traceback (most recent call last):"};
    for (int i = 0; i < 60; ++i) w.first_exception.push_back(std::string(200, 'f'));
    w.first_exception.push_back("RuntimeError: Connection closed by peer");
    std::string m = failure_message(w);
    CHECK(m.rfind("local rank 1, pid 101 (its collectives saw a peer fail); first exception on its stderr:\n"
                  "    | Traceback (most recent call last):\n    | ...", 0) == 0);
    CHECK(m.size() <= 2600);
    CHECK(m.substr(m.size() - 39) == "RuntimeError: Connection closed by peer");
  }

  TEST_CASE("one node: a root cause that only saw its peer fail yields to that peer") {
    JobMachine m(kJob, JobPolicy{});
    m.on(job::Start{});
    m.on(job::Spawned{});
    WorkerExit saw = worker_exit(0, 14, 0, 100), died = worker_exit(3, 0, SIGKILL, 103);
    m.on(job::WorkerExited{saw});   // reaped first: the first failure
    m.on(job::WorkerExited{died});  // after the SIGTERM, but killed by a SIGKILL dtrain never sent
    saw.peer_failure = 3;
    died.stopped_by_agent = true;
    auto out = m.on(job::Drained{{saw, died}});
    REQUIRE(m.root_cause());
    CHECK(m.root_cause()->rank == 3);
    const auto* fin = std::get_if<job::Finish>(&out.back());
    REQUIRE(fin);
    CHECK(fin->exit_code == 137);
    // reported too: on several nodes the others must hear of the failure that is the root cause
    const auto* rep = std::get_if<job::LocalFailure>(&out.front());
    REQUIRE(rep);
    CHECK(rep->exit.rank == 3);
    SUBCASE("a peer stopped by dtrain's own SIGTERM is not the cause") {
      JobMachine n(kJob, JobPolicy{});
      n.on(job::Start{});
      n.on(job::Spawned{});
      WorkerExit termed = worker_exit(3, 0, SIGTERM, 103);
      termed.stopped_by_agent = true;
      n.on(job::WorkerExited{worker_exit(0, 14, 0, 100)});
      n.on(job::Drained{{saw, termed}});
      CHECK(n.root_cause()->rank == 0);
    }
  }

  TEST_CASE("a failure of its own after another node's failure stopped the job is reported too") {
    JobMachine m(kJob, JobPolicy{.external_start = false});
    m.on(job::Start{});
    m.on(job::Spawned{});
    Event e;
    e.kind = Event::Kind::peer_failed;
    e.node_rank = 0;
    e.exit_code = 14;
    e.reason = "node 0 (h0): rank 1 exited with code 14: local rank 1, pid 11";
    auto said = m.on(job::Remote{e});
    CHECK(std::get<job::Say>(said.front()).text ==
          "dtrain: node 0 (h0): rank 1 exited with code 14: local rank 1, pid 11: stopping the local workers");
    auto out = m.on(job::WorkerExited{worker_exit(3, 0, SIGKILL, 103)});
    REQUIRE_FALSE(out.empty());
    CHECK(std::holds_alternative<job::LocalFailure>(out.front()));
    WorkerExit termed = worker_exit(2, 0, SIGTERM, 102);
    termed.stopped_by_agent = true;
    auto more = m.on(job::WorkerExited{termed});
    CHECK_FALSE(std::holds_alternative<job::LocalFailure>(more.front()));
  }
}
