// The job state machine without processes: inputs in, actions out, table by table.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <vector>

#include "dtrain/common/exit_codes.hpp"
#include "job_machine.hpp"

namespace agent = dtrain::agent;
namespace job = dtrain::agent::job;
using agent::JobMachine;
using agent::JobPolicy;
using agent::JobState;
using Lines = std::vector<std::string>;

namespace {

std::string ranks(const std::vector<agent::WorkerExit>& v) {
  std::string s;
  for (const auto& w : v) s += (s.empty() ? "" : ",") + std::to_string(w.rank);
  return s;
}

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

// One line per action, e.g. "kill SIGTERM stopping grace", "finish 3".
std::string render(const job::Action& a) {
  return std::visit(
      overloaded{
          [](const job::Enter& x) { return fmt::format("enter {}", agent::state_name(x.state)); },
          [](const job::Spawn& x) {
            return x.master_port ? fmt::format("spawn {} port {}", x.generation, *x.master_port)
                                 : fmt::format("spawn {}", x.generation);
          },
          [](const job::Kill& x) {
            return fmt::format("kill {}{}{}", agent::signal_name(x.sig), x.stopping ? " stopping" : "",
                               x.grace_s ? " grace" : "");
          },
          [](const job::Say& x) { return "say " + x.text; },
          [](const job::LocalFailure& x) { return fmt::format("local_failure {}", x.exit.rank); },
          [](const job::SelfStopped& x) { return fmt::format("self_stop {} {}", x.stop.exit_code, x.stop.reason); },
          [](const job::Progress&) { return std::string("progress"); },
          [](const job::CancelBackoff&) { return std::string("cancel_backoff"); },
          [](const job::ArmBackoff&) { return std::string("arm_backoff"); },
          [](const job::Collect& x) {
            return fmt::format("collect root {} others [{}]", x.root_cause ? std::to_string(x.root_cause->rank) : "-",
                               ranks(x.other_failures));
          },
          [](const job::Finish& x) {
            return x.reason ? fmt::format("finish {} ({})", x.exit_code, *x.reason) : fmt::format("finish {}", x.exit_code);
          },
      },
      a);
}

// The settings a test varies: the job's (read from the plan's spec) and the launch's (JobPolicy).
struct Settings {
  int max_restarts = 0;
  bool external_start = false;
  double grace_s = 10;
  std::optional<double> max_runtime_s{};
  std::optional<int> master_port{};
  int first_generation = 0;
};

dtrain::config::JobSpec job_of(const Settings& s) {
  dtrain::config::JobSpec job;
  job.restart.max_restarts = s.max_restarts;
  job.grace_s = s.grace_s;
  job.max_runtime_s = s.max_runtime_s;
  return job;
}

struct Machine {
  dtrain::config::JobSpec job;
  JobMachine m;
  explicit Machine(Settings s = {})
      : job(job_of(s)), m(job, JobPolicy{s.external_start, s.master_port, s.first_generation}) {}
  Lines operator()(const job::Input& in) {
    Lines out;
    for (const auto& a : m.on(in)) out.push_back(render(a));
    return out;
  }
  // Start and spawn generation 0 (not external_start): running.
  void run() {
    m.on(job::Start{});
    m.on(job::Spawned{});
    REQUIRE(m.state() == JobState::running);
  }
};

agent::WorkerExit ex(int rank, int code, int sig = 0, int exec_errno = 0) {
  agent::WorkerExit w;
  w.rank = w.local_rank = rank;
  w.pid = 1000 + rank;
  w.exit_code = code;
  w.signal = sig;
  w.exec_errno = exec_errno;
  return w;
}

agent::Event remote(agent::Event::Kind k, int code = 0, std::string reason = {}, int generation = 0) {
  agent::Event e;
  e.kind = k;
  e.node_rank = 1;
  e.exit_code = code;
  e.reason = std::move(reason);
  e.generation = generation;
  return e;
}

using K = agent::Event::Kind;

}  // namespace

TEST_SUITE("agent::job_machine") {
  TEST_CASE("a generation starts at once, or waits for the go of the other nodes") {
    Machine a;
    CHECK(a(job::Start{}) == Lines{"enter starting", "spawn 0"});
    CHECK(a(job::Spawned{}) == Lines{"enter running"});
    CHECK(a(job::WorkerExited{ex(0, 0)}) == Lines{"progress"});
    CHECK(a(job::Drained{{ex(0, 0)}}) == Lines{"collect root - others []", "finish 0"});
    CHECK(a.m.state() == JobState::done);
    CHECK(a(job::Signal{SIGINT, 0}).empty());  // over: nothing happens any more

    Machine b({.external_start = true});
    CHECK(b(job::Start{}) == Lines{"enter starting"});
    CHECK(b.m.waiting_for_go());
    CHECK(b(job::Drained{}).empty());  // nothing to collect before the workers start
    CHECK(b(job::Remote{agent::Event::go(0, 4242)}) == Lines{"spawn 0 port 4242"});
    CHECK(b(job::Spawned{}) == Lines{"enter running"});
    CHECK(b(job::Remote{agent::Event::go(0)}).empty());  // a go for a running generation

    Machine c({.master_port = 29500});
    CHECK(c(job::Start{}) == Lines{"enter starting", "spawn 0 port 29500"});
  }

  TEST_CASE("the first failure is the root cause; what ends the job, by exit and budget") {
    struct Row {
      agent::WorkerExit failure;
      int max_restarts;
      Lines end;  // after the group drained
    };
    const std::string restart_1 = "say dtrain: rank 1 exit code 3; restarting the group (1/2)";
    const Row rows[] = {
        {ex(1, 3), 0, {"collect root 1 others [0]", "finish 3"}},
        {ex(1, 0, SIGSEGV), 0, {"collect root 1 others [0]", "finish 139"}},
        {ex(1, 3), 2, {"collect root 1 others [0]", restart_1, "enter restarting", "arm_backoff"}},
        // a command that cannot be executed is not restarted, whatever the budget
        {ex(1, 127, 0, ENOENT), 3, {"collect root 1 others [0]", "finish 127"}},
    };
    for (const auto& row : rows) {
      CAPTURE(row.failure.describe());
      CAPTURE(row.max_restarts);
      Machine a({.max_restarts = row.max_restarts});
      a.run();
      CHECK(a(job::WorkerExited{row.failure}) ==
            Lines{"local_failure 1", "enter stopping", "kill SIGTERM stopping grace"});
      CHECK(a.m.stop_reason() == agent::StopReason::failure);
      CHECK(a(job::WorkerExited{ex(0, 0, SIGTERM)}) == Lines{"progress"});  // not a second root cause
      auto failure = row.failure;
      failure.last_stderr = {"boom"};
      CHECK(a(job::Drained{{ex(0, 0, SIGTERM), ex(2, 0), failure}}) == row.end);
      REQUIRE(a.m.root_cause());
      CHECK(a.m.root_cause()->last_stderr == std::vector<std::string>{"boom"});
    }
  }

  TEST_CASE("restarts until the budget is spent, then the root cause's status") {
    Machine a({.max_restarts = 2});
    a.run();
    for (int g = 0; g < 3; ++g) {
      CAPTURE(g);
      CHECK(a.m.generation() == g);
      a(job::WorkerExited{ex(0, 5)});
      auto end = a(job::Drained{{ex(0, 5)}});
      if (g < 2) {
        CHECK(end.back() == "arm_backoff");
        CHECK(end[1] == fmt::format("say dtrain: rank 0 exit code 5; restarting the group ({}/2)", g + 1));
        CHECK(a(job::BackoffOver{}) == Lines{"enter starting", fmt::format("spawn {}", g + 1)});
        CHECK_FALSE(a.m.root_cause());  // every generation has its own
        CHECK(a(job::Spawned{}) == Lines{"enter running"});
      } else {
        CHECK(end == Lines{"collect root 0 others []", "finish 5"});
      }
    }
    CHECK(a.m.restarts() == 2);
  }

  TEST_CASE("signals: forwarded, stop, escalate once; the root cause survives an interrupt") {
    Machine a({.grace_s = 7});
    a.run();
    CHECK(a(job::Signal{SIGUSR1, 2}) == Lines{"kill SIGUSR1"});
    CHECK(a(job::Signal{SIGINT, 2}) == Lines{"say dtrain: SIGINT: stopping 2 worker(s) (grace 7 s; again to kill them now)",
                                             "self_stop 130 interrupted by SIGINT", "enter stopping",
                                             "kill SIGINT stopping grace"});
    CHECK(a(job::Signal{SIGINT, 2}) == Lines{"say dtrain: SIGINT again: killing the workers now", "kill SIGKILL"});
    CHECK(a(job::Signal{SIGINT, 2}).empty());
    CHECK(a(job::Drained{{ex(0, 0, SIGKILL)}}) ==
          Lines{"collect root - others [0]", "finish 130 (interrupted by SIGINT)"});

    Machine b;
    b.run();
    b(job::WorkerExited{ex(1, 4)});
    CHECK(b(job::Signal{SIGTERM, 0}).empty());  // nothing left to kill: not even an escalation
    CHECK(b(job::Signal{SIGTERM, 1}) == Lines{"say dtrain: SIGTERM again: killing the workers now", "kill SIGKILL"});
    CHECK(b(job::Drained{{ex(1, 4)}}) == Lines{"collect root 1 others []", "finish 4"});

    Machine c({.external_start = true});
    c(job::Start{});
    CHECK(c(job::Signal{SIGHUP, 0}) ==
          Lines{"say dtrain: SIGHUP: stopping 0 worker(s) (grace 10 s; again to kill them now)",
                "self_stop 129 interrupted by SIGHUP", "enter stopping"});
    CHECK(c(job::Drained{}) == Lines{"collect root - others []", "finish 129 (interrupted by SIGHUP)"});
  }

  TEST_CASE("the grace period ends in SIGKILL") {
    Machine a({.grace_s = 0.5});
    a.run();
    CHECK(a(job::GraceOver{2}) == Lines{"say dtrain: 2 worker(s) still running after the 0.5 s grace period: SIGKILL",
                                        "kill SIGKILL"});
    CHECK(a(job::GraceOver{0}) == Lines{"kill SIGKILL"});
  }

  TEST_CASE("which stop cause wins: sequences and the end they reach") {
    struct Row {
      const char* name;
      std::vector<job::Input> inputs;  // after run(), before the group drains
      std::string end;                 // the last action once it drained
    };
    const Row rows[] = {
        {"max_runtime_s", {job::RuntimeOver{}}, "finish 124 (max_runtime_s 5 passed)"},
        {"max_runtime_s overrides a failure", {job::WorkerExited{ex(0, 3)}, job::RuntimeOver{}},
         "finish 124 (max_runtime_s 5 passed)"},
        {"max_runtime_s does not override an interrupt", {job::Signal{SIGINT, 1}, job::RuntimeOver{}},
         "finish 130 (interrupted by SIGINT)"},
        {"peer failure without budget: its status", {job::Remote{remote(K::peer_failed, 6)}},
         "finish 6 (a worker on node 1 failed)"},
        {"peer failure of status 0 still fails", {job::Remote{remote(K::peer_failed, 0, "gone")}}, "finish 1 (gone)"},
        {"a peer failure after a local one changes nothing", {job::WorkerExited{ex(0, 3)}, job::Remote{remote(K::peer_failed, 6)}},
         "finish 3"},
        {"node lost overrides a failure", {job::WorkerExited{ex(0, 3)}, job::Remote{remote(K::node_lost)}},
         "finish 69 (node 1 was lost)"},
        {"node lost overrides an interrupt", {job::Signal{SIGINT, 1}, job::Remote{remote(K::node_lost, 0, "node b silent")}},
         "finish 69 (node b silent)"},
        {"abort", {job::Remote{remote(K::abort, 42, "told to")}}, "finish 42 (told to)"},
        {"a restart order does not override an interrupt", {job::Signal{SIGINT, 1}, job::Remote{remote(K::restart, 0, {}, 1)}},
         "finish 130 (interrupted by SIGINT)"},
        {"an internal error", {job::Fatal{"disk full"}}, "finish 125 (disk full)"},
        {"the first internal error is the reason", {job::Fatal{"first"}, job::Fatal{"second"}}, "finish 125 (first)"},
        {"an internal error overrides an interrupt", {job::Signal{SIGINT, 1}, job::Fatal{"oops"}}, "finish 125 (oops)"},
    };
    for (const auto& row : rows) {
      CAPTURE(row.name);
      Machine a({.max_runtime_s = 5});
      a.run();
      for (const auto& in : row.inputs) a(in);
      CHECK(a.m.state() == JobState::stopping);
      auto end = a(job::Drained{{ex(0, 0, SIGTERM)}});
      REQUIRE_FALSE(end.empty());
      CHECK(end.back() == row.end);
    }
  }

  TEST_CASE("elastic: a membership change restarts into its generation, counted, even with the budget spent") {
    Machine a({.max_restarts = 0, .first_generation = 4});
    a.run();
    CHECK(a.m.generation() == 4);  // a node that joined a running job starts at its generation
    CHECK(a(job::Remote{remote(K::membership, 0, "host h joins", 5)}) ==
          Lines{"say dtrain: host h joins: stopping the local workers", "enter stopping", "kill SIGTERM stopping grace"});
    a(job::Drained{{ex(0, 0, SIGTERM)}});
    CHECK(a(job::BackoffOver{}) == Lines{"enter starting", "spawn 5"});
    CHECK(a.m.restarts() == 1);
    a(job::Spawned{});
    a(job::Remote{remote(K::membership, 0, "host i joins", 6)});
    CHECK(a(job::Drained{{ex(0, 0, SIGTERM)}}).at(1) == "say dtrain: host i joins; restarting the group (2/2)");
    // a failure now finds no budget: the job ends with it
    CHECK(a(job::BackoffOver{}) == Lines{"enter starting", "spawn 6"});
    a(job::Spawned{});
    a(job::WorkerExited{ex(0, 3)});
    CHECK(a(job::Drained{{ex(0, 3)}}).back() == "finish 3");
  }

  TEST_CASE("events from other nodes: what they stop and where they lead") {
    Machine a;
    a.run();
    CHECK(a(job::Remote{remote(K::restart, 0, {}, 3)}) ==
          Lines{"say dtrain: the job moves to generation 3: stopping the local workers", "enter stopping",
                "kill SIGTERM stopping grace"});
    // restarts even without a budget of its own, into the generation it was told
    CHECK(a(job::Drained{{ex(0, 0, SIGTERM)}}) ==
          Lines{"collect root - others [0]", "say dtrain: the job moves to generation 3; restarting the group (1/1)",
                "enter restarting", "arm_backoff"});
    CHECK(a(job::BackoffOver{}) == Lines{"enter starting", "spawn 3"});

    Machine b({.max_restarts = 1});
    b.run();
    CHECK(b(job::Remote{remote(K::peer_failed, 6)}).back() == "kill SIGTERM stopping grace");
    CHECK(b(job::Remote{remote(K::abort, 9, "late")}) == Lines{"say dtrain: late: stopping the local workers"});
    CHECK(b(job::Drained{}).back() == "finish 9 (late)");
  }

  TEST_CASE("while restarting: the backoff is cancelled or the end comes at once") {
    struct Row {
      job::Input input;
      Lines actions;
      std::string end;
    };
    const Row rows[] = {
        {job::RuntimeOver{},
         {"say dtrain: max_runtime_s 1 passed: stopping the job", "self_stop 124 max_runtime_s 1 passed",
          "cancel_backoff", "enter stopping", "kill SIGTERM stopping grace"},
         "finish 124 (max_runtime_s 1 passed)"},
        {job::Signal{SIGINT, 0},
         {"say dtrain: SIGINT: stopping 0 worker(s) (grace 10 s; again to kill them now)",
          "self_stop 130 interrupted by SIGINT", "enter stopping"},
         "finish 130 (interrupted by SIGINT)"},
        {job::Remote{remote(K::abort, 42, "told to")},
         {"say dtrain: told to: stopping the local workers", "enter stopping"},
         "finish 42 (told to)"},
        {job::Fatal{"oops"}, {"cancel_backoff", "enter stopping", "kill SIGKILL stopping"}, "finish 125 (oops)"},
    };
    for (const auto& row : rows) {
      CAPTURE(row.actions.front());
      Machine a({.max_restarts = 1, .max_runtime_s = 1});
      a.run();
      a(job::WorkerExited{ex(0, 3)});
      CHECK(a(job::Drained{{ex(0, 3)}}).back() == "arm_backoff");
      CHECK(a(row.input) == row.actions);
      CHECK(a(job::BackoffOver{}).empty());  // a late backoff starts nothing
      auto end = a(job::Drained{});
      REQUIRE_FALSE(end.empty());
      CHECK(end.back() == row.end);
    }
  }

  TEST_CASE("a worker that cannot be started stops the others at once") {
    Machine a({.max_restarts = 3});
    CHECK(a(job::Start{}) == Lines{"enter starting", "spawn 0"});
    CHECK(a(job::SpawnFailed{"cannot start rank 1"}) ==
          Lines{"say dtrain: cannot start rank 1", "enter running", "enter stopping", "kill SIGKILL stopping"});
    CHECK(a(job::Drained{{ex(0, 0, SIGKILL)}}).back() == "finish 125 (cannot start rank 1)");
  }

  TEST_CASE("exits: status and description") {
    CHECK(ex(0, 3).status() == 3);
    CHECK(ex(0, 0, SIGSEGV).status() == 128 + SIGSEGV);
    CHECK(ex(0, 0, SIGSEGV).describe() == "killed by SIGSEGV (11)");
    CHECK(ex(0, 127, 0, ENOENT).describe().find("could not execute the command") == 0);
    auto workdir = ex(0, 127, 0, ENOENT);
    workdir.workdir_error = true;
    CHECK(workdir.describe().find("could not enter the workdir (No such file or directory)") == 0);
    CHECK(agent::signal_name(SIGKILL) == "SIGKILL");
  }

  TEST_CASE("a node stopping on its own says so before it stops: a signal, max_runtime_s, a hang") {
    Machine a;
    a.run();
    Lines l = a(job::Signal{SIGINT, 2});
    REQUIRE(l.size() >= 3);
    CHECK(l[1] == "self_stop 130 interrupted by SIGINT");
    CHECK(l[2] == "enter stopping");
    Machine b({.max_runtime_s = 5.0});
    b.run();
    l = b(job::RuntimeOver{});
    CHECK(l[1] == "self_stop 124 max_runtime_s 5 passed");
    Machine c;
    c.run();
    l = c(job::Hung{"hang: no progress for 3 s"});
    CHECK(l == Lines{"say dtrain: hang: no progress for 3 s: stopping the job", "self_stop 70 hang: no progress for 3 s",
                     "enter stopping", "kill SIGTERM stopping grace"});
    CHECK(c(job::Drained{{ex(0, 0, SIGTERM)}}).back() == "finish 70 (hang: no progress for 3 s)");
    // a hang while stopping for a failure changes nothing
    Machine d;
    d.run();
    d(job::WorkerExited{ex(1, 3)});
    CHECK(d(job::Hung{"x"}).empty());
  }
}
