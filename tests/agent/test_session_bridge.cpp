// The multi-node bridge as a pure state machine: inputs in, actions out, no sockets or threads.
#include <doctest/doctest.h>

#include <csignal>

#include "dtrain/common/exit_codes.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "bridge_test.hpp"
#include "session_bridge.hpp"

using namespace dtrain::agent;
using namespace dtrain::agent::bridge;
using namespace bridge_test;
using std::chrono::milliseconds;
namespace rdzv = dtrain::rdzv;
namespace exit_code = dtrain::exit_code;

namespace {

rdzv::Event failure(int node, int rank, int code, int sig = 0) {
  return bridge_test::failure(1, node, rank, code, sig, "local rank 0, pid 42");
}

rdzv::Event lost(int node) {
  rdzv::Event e;
  e.seq = 1;
  e.kind = "lost";
  e.node = node;
  e.host = node < 0 ? "10.0.0.1:29400" : "h" + std::to_string(node);
  e.message = node < 0 ? "lost the connection to the rendezvous: closed" : "no heartbeat for 2.0 s";
  return e;
}

template <class T>
T at(const std::vector<Action>& a, std::size_t i) {
  REQUIRE(a.size() > i);
  REQUIRE(std::holds_alternative<T>(a[i]));
  return std::get<T>(a[i]);
}

}  // namespace

TEST_SUITE("agent::session_bridge") {

TEST_CASE("the first join starts monitoring, then hands the agent its go") {
  auto b = make();
  CHECK(b.phase() == SessionBridge::Phase::joining);
  auto a = b.on(Joined{0, 4000});
  REQUIRE(a.size() == 2);
  CHECK(at<StartMonitoring>(a, 0).generation == 0);
  Event go = at<Post>(a, 1).event;
  CHECK(go.kind == Event::Kind::go);
  CHECK(go.generation == 0);
  CHECK(go.master_port == 4000);
  CHECK(b.phase() == SessionBridge::Phase::running);
}

TEST_CASE("agent states are published to the session while joined, with the running workers") {
  auto b = joined();
  auto p = only<Publish>(b.on(AgentState{JobState::running, 0}));
  CHECK(p.state == "running");
  CHECK(p.running == 2);
  CHECK(p.generation == 0);
  CHECK(only<Publish>(b.on(AgentState{JobState::starting, 0})).running == 0);
  CHECK(make().on(AgentState{JobState::starting, 0}).empty());  // not joined yet: nothing to publish to
}

TEST_CASE("a local worker failure is reported at once and decides the generation") {
  auto b = joined();
  SUBCASE("exit code") {
    auto r = only<Report>(b.on(LocalFailure{worker_exit(1, 3), 0}));
    CHECK(r.rank == 1);
    CHECK(r.exit_code == 3);
    CHECK(r.signal == 0);
    CHECK(r.message == "local rank 1, pid 1234");
  }
  SUBCASE("signal: the code travels as 0, the signal number on its own") {
    auto r = only<Report>(b.on(LocalFailure{worker_exit(0, 0, 9), 0}));
    CHECK(r.exit_code == 0);
    CHECK(r.signal == 9);
  }
  CHECK(b.fate(0) == SessionBridge::Fate::local_failure);
  // our own report comes back as a job event; a later failure elsewhere is not the root cause
  CHECK(b.on(JobEvent{failure(kSelf, 1, 3), 0}).empty());
  CHECK(b.on(JobEvent{failure(1, 2, 4), 0}).empty());
  CHECK(b.on(JobEvent{lost(2), 0}).empty());
}

TEST_CASE("a failure elsewhere becomes the agent's root cause, once per generation") {
  auto b = joined();
  SUBCASE("worker exit code") {
    Event ev = only<Post>(b.on(JobEvent{failure(1, 2, 3), 0})).event;
    CHECK(ev.kind == Event::Kind::peer_failed);
    CHECK(ev.exit_code == 3);
    CHECK(ev.node_rank == 1);
    CHECK(ev.reason == "node 1 (h1): rank 2 exited with code 3: local rank 0, pid 42");
  }
  SUBCASE("worker signal: 128+N") {
    Event ev = only<Post>(b.on(JobEvent{failure(1, 2, 0, 11), 0})).event;
    CHECK(ev.exit_code == 128 + 11);
  }
  SUBCASE("rank -1: that node's agent failed; no restart can mend it") {
    Event ev = only<Post>(b.on(JobEvent{failure(1, -1, 127), 0})).event;
    CHECK(ev.kind == Event::Kind::abort);
    CHECK(ev.exit_code == 127);
  }
  CHECK(b.fate(0) == SessionBridge::Fate::remote_failure);
  CHECK(b.on(JobEvent{lost(2), 0}).empty());
  CHECK(b.on(LocalFailure{worker_exit(0, 1), 0}).size() == 1);  // still reported: the server orders them
}

TEST_CASE("a lost node and a lost rendezvous end the job with node_lost") {
  auto b = joined();
  SUBCASE("node") {
    Event ev = only<Post>(b.on(JobEvent{lost(2), 0})).event;
    CHECK(ev.kind == Event::Kind::node_lost);
    CHECK(ev.exit_code == exit_code::node_lost);
    CHECK(ev.reason == "node 2 (h2) lost: no heartbeat for 2.0 s");
  }
  SUBCASE("rendezvous") {
    Event ev = only<Post>(b.on(JobEvent{lost(-1), 0})).event;
    CHECK(ev.exit_code == exit_code::node_lost);
    CHECK(ev.reason.find("lost the rendezvous at 10.0.0.1:29400 (node 0's agent or the rendezvous host is gone)") == 0);
  }
}

TEST_CASE("events that are not fatal, or of another generation, change nothing") {
  auto b = joined();
  rdzv::Event info = failure(1, 0, 1);
  info.kind = "info";
  CHECK(b.on(JobEvent{info, 0}).empty());
  CHECK(b.on(JobEvent{failure(1, 0, 1), 7}).empty());
  CHECK(b.fate(0) == SessionBridge::Fate::open);
}

TEST_CASE("a restart re-joins under the new generation, then hands out its go") {
  auto b = joined();
  b.on(JobEvent{failure(1, 2, 3), 0});
  b.on(AgentState{JobState::stopping, 0});
  b.on(AgentState{JobState::restarting, 0});
  auto a = b.on(AgentState{JobState::starting, 1});
  REQUIRE(a.size() == 2);
  CHECK(at<Publish>(a, 0).state == "starting");
  CHECK(at<Rejoin>(a, 1).generation == 1);
  CHECK(b.phase() == SessionBridge::Phase::joining);
  CHECK(b.on(JobEvent{lost(1), 0}).empty());  // the old generation is over
  a = b.on(Joined{1, 4100});
  REQUIRE(a.size() == 2);
  CHECK(at<StartMonitoring>(a, 0).generation == 1);
  CHECK(at<Post>(a, 1).event.generation == 1);
  CHECK(at<Post>(a, 1).event.master_port == 4100);
  CHECK(b.fate(1) == SessionBridge::Fate::open);  // a fresh generation, a fresh fate
  CHECK(only<Post>(b.on(JobEvent{lost(1), 1})).event.kind == Event::Kind::node_lost);
}

TEST_CASE("a failed re-join aborts the agent with the join's status; a cancelled one does nothing") {
  auto b = joined();
  b.on(AgentState{JobState::starting, 1});
  SUBCASE("failed") {
    Event ev = only<Post>(b.on(JoinFailed{1, exit_code::rdzv_timeout, "join timed out"})).event;
    CHECK(ev.kind == Event::Kind::abort);
    CHECK(ev.exit_code == exit_code::rdzv_timeout);
    CHECK(ev.reason == "re-joining the rendezvous for generation 1: join timed out");
  }
  SUBCASE("cancelled") { CHECK(b.on(JoinFailed{1, 0, "cancelled", true}).empty()); }
  CHECK(b.phase() == SessionBridge::Phase::detached);
  // no membership: the agent's failure cannot be reported
  auto e = only<End>(b.on(AgentDone{exit_code::interrupted, "interrupted by SIGINT"}));
  CHECK(e.exit_code == exit_code::interrupted);
}

TEST_CASE("the agent ending while a re-join runs: the join's answer starts nothing") {
  auto b = joined();
  b.on(AgentState{JobState::starting, 1});
  b.on(AgentState{JobState::stopping, 1});
  b.on(AgentState{JobState::done, 1});
  CHECK(b.on(Joined{1, 4100}).empty());
  CHECK(only<End>(b.on(AgentDone{exit_code::terminated, "interrupted by SIGTERM"})).exit_code == exit_code::terminated);
}

TEST_CASE("a node that stops on its own keeps its status; what follows is a consequence") {
  auto b = joined();
  CHECK(only<Publish>(b.on(AgentState{JobState::stopping, 0})).state == "stopping");
  CHECK(b.fate(0) == SessionBridge::Fate::self_stop);
  CHECK(b.on(JobEvent{lost(-1), 0}).empty());
  CHECK(b.on(JobEvent{failure(1, 2, 3), 0}).empty());
  auto e = only<End>(b.on(AgentDone{exit_code::interrupted, "interrupted by SIGINT"}));
  CHECK(e.exit_code == exit_code::interrupted);
  CHECK(e.message.empty());
  CHECK(b.ended());
}

TEST_CASE("an agent that fails with nothing to blame reports itself as rank -1") {
  auto b = joined();
  auto a = b.on(AgentDone{exit_code::not_found, "sh: command not found"});
  REQUIRE(a.size() == 2);
  auto r = at<Report>(a, 0);
  CHECK(r.rank == -1);
  CHECK(r.exit_code == exit_code::not_found);
  CHECK(r.message == "sh: command not found");
  CHECK(at<End>(a, 1).exit_code == exit_code::not_found);
}

TEST_CASE("an agent failing after its own worker's report does not report again") {
  auto b = joined();
  b.on(LocalFailure{worker_exit(1, 3), 0});
  // it waits for its own report to come back from the rendezvous: the root cause every node names
  CHECK(only<Settle>(b.on(AgentDone{3, ""})).limit == milliseconds(3000));
  auto end = only<End>(b.on(JobEvent{failure(kSelf, 1, 3), 0}));
  CHECK(end.exit_code == 3);
  REQUIRE(end.root);
  CHECK(end.root->rank == 1);
}

TEST_CASE("success enters the exit barrier; its outcome is the node's status") {
  auto b = joined();
  b.on(AgentState{JobState::done, 0});
  CHECK(only<ExitBarrier>(b.on(AgentDone{0, ""})).limit == milliseconds(5000));
  CHECK(b.phase() == SessionBridge::Phase::barrier);
  CHECK(b.on(JobEvent{failure(1, 2, 5), 0}).empty());  // finish() answers for these
  SUBCASE("every node finished") {
    auto e = only<End>(b.on(BarrierDone{0, ""}));
    CHECK(e.exit_code == 0);
    CHECK(e.message.empty());
  }
  SUBCASE("a failure elsewhere ended the wait") {
    auto e = only<End>(b.on(BarrierDone{5, "root cause: node 1 (h1): rank 1 exited with code 5"}));
    CHECK(e.exit_code == 5);
    CHECK(e.message == "the job failed after this node's workers finished (exit status 5): root cause: node 1 (h1): "
                       "rank 1 exited with code 5");
  }
  CHECK(b.ended());
  CHECK(b.on(AgentState{JobState::starting, 3}).empty());
}

TEST_CASE("a failure heard after the agent ended with 0 is a late failure, without a barrier") {
  auto b = joined();
  SUBCASE("heard after the agent reached done") {
    b.on(AgentState{JobState::done, 0});
    CHECK(b.on(JobEvent{failure(1, 3, 5), 0}).empty());
  }
  SUBCASE("posted, but the agent had finished before it read it") {
    CHECK(b.on(JobEvent{failure(1, 3, 5), 0}).size() == 1);
    b.on(AgentState{JobState::done, 0});
  }
  auto e = only<End>(b.on(AgentDone{0, ""}));
  CHECK(e.exit_code == 5);
  CHECK(e.message.find("after this node's workers finished (exit status 5): root cause: node 1 (h1): rank 3") !=
        std::string::npos);
}

TEST_CASE("a late failure whose status is 0 still fails the node") {
  auto b = joined();
  b.on(AgentState{JobState::done, 0});
  b.on(JobEvent{failure(1, 3, 0), 0});
  CHECK(only<End>(b.on(AgentDone{0, ""})).exit_code == 1);
}

TEST_CASE("the exit barrier's outcomes map to exit statuses") {
  CHECK(barrier_outcome(std::nullopt, "e:1").exit_code == 0);
  auto f = barrier_outcome(failure(1, 2, 6), "e:1");
  CHECK(f.exit_code == 6);
  CHECK(f.reason.find("root cause: node 1 (h1): rank 2 exited with code 6") == 0);
  CHECK(barrier_outcome(lost(3), "e:1").exit_code == exit_code::node_lost);

  auto l = barrier_failure(rdzv::NodeLostError(2, "h2", "node 2 (h2) lost: its connection closed"));
  CHECK(l.exit_code == exit_code::node_lost);
  CHECK(l.reason == "exit barrier: node 2 (h2) lost: its connection closed");
  auto t = barrier_failure(dtrain::TimeoutError("exit barrier timed out: node 2 (h2) never finished"));
  CHECK(t.exit_code == exit_code::rdzv_timeout);
  CHECK(t.reason == "exit barrier timed out: node 2 (h2) never finished");
  // a plain I/O error is not a lost node (no guessing from the text)
  CHECK(barrier_failure(dtrain::IoError("rendezvous: node 1 was lost")).exit_code == exit_code::internal);
}

TEST_CASE("a failed re-join's status comes from the error's type") {
  CHECK(join_failure(1, rdzv::Cancelled("cancelled")).cancelled);
  CHECK(join_failure(1, dtrain::TimeoutError("t")).exit_code == exit_code::rdzv_timeout);
  CHECK(join_failure(1, dtrain::AuthError("a")).exit_code == exit_code::auth_refused);
  auto j = join_failure(2, rdzv::JoinError(rdzv::wire::ErrorCode::spec_mismatch, "spec mismatch"));
  CHECK(j.exit_code == exit_code::usage);
  CHECK(j.generation == 2);
  CHECK_FALSE(j.cancelled);
}


TEST_CASE("a node that stops on its own tells the others first; they end as it does, not as lost") {
  auto b = joined();
  SelfStop s{SIGINT, 130, "interrupted by SIGINT"};
  auto r = only<ReportStop>(b.on(SelfStopped{s, 0}));
  CHECK(r.exit_code == 130);
  CHECK(r.signal == SIGINT);
  CHECK(r.message == "interrupted (SIGINT)");
  CHECK(b.fate(0) == SessionBridge::Fate::self_stop);
  CHECK(b.on(SelfStopped{s, 0}).empty());  // once
  // a failure decided first: that is the cause, the stop is not reported
  auto f = joined();
  f.on(LocalFailure{worker_exit(1, 3), 0});
  CHECK(f.on(SelfStopped{s, 0}).empty());
  // what the others make of it
  rdzv::Event e;
  e.seq = 1;
  e.kind = "stopped";
  e.node = 1;
  e.host = "h1";
  e.exit_code = 130;
  e.signal = SIGINT;
  e.message = "interrupted (SIGINT)";
  auto ev = agent_event_for(e, "10.0.0.1:29400");
  REQUIRE(ev);
  CHECK(ev->kind == Event::Kind::abort);
  CHECK(ev->exit_code == 130);
  CHECK(ev->reason == "node 1 (h1) interrupted (SIGINT)");
  e.message = stop_message({0, 124, "max_runtime_s 5 passed"});
  CHECK(agent_event_for(e, "")->reason == "node 1 (h1) stopped: max_runtime_s 5 passed");
}

TEST_CASE("a failure's report carries the last lines of the rank's stderr, bounded") {
  WorkerExit w = worker_exit(2, 3);
  CHECK(failure_message(w) == "local rank 0, pid 1234");
  w.last_stderr = {"first", "Traceback (most recent call last):", "ValueError: bad"};
  CHECK(failure_message(w) == "local rank 0, pid 1234; last lines of its stderr:\n    | first\n"
                              "    | Traceback (most recent call last):\n    | ValueError: bad");
  w.last_stderr = {"\x1b[2Kwiped\r", "caf\xc3\xa9 \xff"};  // the other nodes print it: shown, not acted on
  CHECK(failure_message(w) == "local rank 0, pid 1234; last lines of its stderr:\n    | ^[[2Kwiped^M\n"
                              "    | caf\xc3\xa9 M-^?");
  w.last_stderr.assign(40, std::string(1000, 'y'));
  w.last_stderr.back() = "the end";
  std::string m = failure_message(w);
  CHECK(m.size() < 3000);
  CHECK(m.substr(m.size() - 7) == "the end");  // the last line is always kept
  auto b = joined();
  auto r = only<Report>(b.on(LocalFailure{w, 0}));
  CHECK(r.message == m);
}

TEST_CASE("elastic: a lost node restarts the job, a joining node is a membership change; Joined brings the plan") {
  auto b = SessionBridge(BridgeConfig{1, 2, "10.0.0.1:29400", milliseconds(5000), true});
  auto plan = std::make_shared<const dtrain::config::Plan>();
  Event go = at<Post>(b.on(Joined{0, 4000, 1, plan}), 1).event;
  CHECK(go.plan == plan);
  Event ev = only<Post>(b.on(JobEvent{lost(2), 0})).event;
  CHECK(ev.kind == Event::Kind::peer_failed);  // within the restart budget: the nodes left go on
  CHECK(ev.exit_code == exit_code::node_lost);
  CHECK(ev.reason.find("; the elastic job goes on with the nodes left") != std::string::npos);
  CHECK(at<Rejoin>(b.on(AgentState{JobState::starting, 1}), 1).generation == 1);
  CHECK(at<Post>(b.on(Joined{1, 4100, 0, plan}), 1).event.kind == Event::Kind::go);  // now node 0
  // our own report as node 0 is recognised as ours (the rank changed with the generation)
  CHECK(b.on(JobEvent{failure(0, 0, 3), 1}).empty());

  rdzv::Event j;
  j.kind = "joined";
  j.generation = 4;
  j.host = "h9";
  j.message = "host h9 joins: the job moves to generation 5 with 3 nodes";
  auto m = agent_event_for(j, "");
  REQUIRE(m);
  CHECK(m->kind == Event::Kind::membership);
  CHECK(m->generation == 5);
  CHECK(m->reason == j.message);
  CHECK(agent_event_for(lost(2), "")->kind == Event::Kind::node_lost);  // a fixed job ends with 69
}
}
