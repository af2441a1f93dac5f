// The agent with real worker processes (forked and exec'd by the agent, spawn.hpp), driven by
// hand-built plans: env contract, group fate, signals, restarts, output, no orphans.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "agent_test_util.hpp"
#include "dtrain/common/exit_codes.hpp"

using namespace agent_test;
namespace agent = dtrain::agent;

namespace {

std::map<std::string, std::string> parse_env(const std::string& text) {
  std::map<std::string, std::string> env;
  for (const auto& l : lines_of(text)) {
    auto eq = l.find('=');
    if (eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
  }
  return env;
}

}  // namespace

TEST_SUITE("agent::agent") {
  TEST_CASE("env contract for every rank") {
    TempDir t;
    auto plan = sh_plan(4, "env > \"$T/env.$RANK.tmp\" && mv \"$T/env.$RANK.tmp\" \"$T/env.$RANK\"", t);
    plan.batch = dtrain::config::BatchPlan{};
    plan.batch->global = 32;
    plan.batch->per_replica = 8;
    plan.batch->micro_batches = 2;
    plan.batch->micro_batch_size = 4;
    plan.batch->dataset_size = 320;
    plan.batch->epochs = 2;
    plan.batch->iterations_per_epoch = 10;
    plan.batch->total_iterations = 20;
    plan.spec.env["USER_VAR"] = "from-spec";
    plan.run_id = "envrun";
    auto o = options(plan, t);
    o.plan.spec.restart.max_restarts = 2;
    o.store_addr = "127.0.0.1:1";
    o.store_token = "secret";
    auto r = run_agent(o, t);
    REQUIRE(r.rc == 0);
    std::set<std::string> ports;
    for (int rank = 0; rank < 4; ++rank) {
      CAPTURE(rank);
      auto env = parse_env(slurp(t.path / ("env." + std::to_string(rank))));
      CHECK(env["RANK"] == std::to_string(rank));
      CHECK(env["LOCAL_RANK"] == std::to_string(rank));
      CHECK(env["WORLD_SIZE"] == "4");
      CHECK(env["LOCAL_WORLD_SIZE"] == "4");
      CHECK(env["GROUP_RANK"] == "0");
      CHECK(env["ROLE_RANK"] == std::to_string(rank));
      CHECK(env["ROLE_WORLD_SIZE"] == "4");
      CHECK(env["MASTER_ADDR"] == "127.0.0.1");
      int port = std::stoi(env["MASTER_PORT"]);
      CHECK(port > 0);
      ports.insert(env["MASTER_PORT"]);
      CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "0");
      CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "2");
      CHECK(env["TORCHELASTIC_RUN_ID"] == "envrun");
      CHECK(env["DTRAIN_RUN_ID"] == "envrun");
      CHECK(env["DTRAIN_GENERATION"] == "0");
      CHECK(env["DTRAIN_NODE_RANK"] == "0");
      CHECK(env["DTRAIN_NNODES"] == "1");
      CHECK(env["DTRAIN_WORLD_SIZE"] == "4");
      CHECK(env["DTRAIN_STORE_ADDR"] == "127.0.0.1:1");
      CHECK(env["DTRAIN_STORE_TOKEN"] == "secret");
      CHECK(env["DTRAIN_LOCAL_ADDR"] == "127.0.0.1");
      CHECK(env["DTRAIN_GLOBAL_BATCH"] == "32");
      CHECK(env["DTRAIN_PER_REPLICA_BATCH"] == "8");
      CHECK(env["DTRAIN_MICRO_BATCHES"] == "2");
      CHECK(env["DTRAIN_MICRO_BATCH_SIZE"] == "4");
      CHECK(env["DTRAIN_DATASET_SIZE"] == "320");
      CHECK(env["DTRAIN_EPOCHS"] == "2");
      CHECK(env["DTRAIN_ITERATIONS_PER_EPOCH"] == "10");
      CHECK(env["DTRAIN_TOTAL_ITERATIONS"] == "20");
      CHECK(env["USER_VAR"] == "from-spec");
      CHECK_FALSE(env["OMP_NUM_THREADS"].empty());
      REQUIRE_FALSE(env["DTRAIN_PLAN"].empty());
      CHECK(fs::path(env["DTRAIN_PLAN"]).filename() == "plan.json");
      CHECK(env.count("PATH") == 1);  // the agent's own environment is passed on
    }
    CHECK(ports.size() == 1);  // one master port for the whole group
    // the temporary run folder (plan.json) is gone after the run
    CHECK_FALSE(fs::exists(r.result.run_dir));
  }

  TEST_CASE("DTRAIN_PLAN holds the plan while the job runs; OMP_NUM_THREADS from the spec wins") {
    TempDir t;
    auto plan = sh_plan(2, "cat \"$DTRAIN_PLAN\" > \"$T/plan.$RANK\"; echo \"$OMP_NUM_THREADS\" > \"$T/omp.$RANK\"", t);
    plan.spec.env["OMP_NUM_THREADS"] = "3";
    auto o = options(plan, t);
    auto r = run_agent(o, t);
    REQUIRE(r.rc == 0);
    CHECK(slurp(t.path / "plan.0") == dtrain::config::plan_to_json(o.plan) + "\n");
    CHECK(slurp(t.path / "plan.0").find("\"world_size\": 2") != std::string::npos);
    CHECK(slurp(t.path / "omp.1") == "3\n");
  }

  TEST_CASE("one rank exits 3: launch exits 3 and the others were terminated") {
    TempDir t;
    auto plan = sh_plan(3,
                        "if [ \"$RANK\" = 1 ]; then while [ ! -e \"$T/up.0\" ] || [ ! -e \"$T/up.2\" ]; do sleep 0.02; done;"
                        " echo 'rank one is failing' >&2; exit 3; fi; touch \"$T/up.$RANK\"; exec sleep 60",
                        t);
    auto r = run_agent(options(plan, t), t);
    CHECK(r.rc == 3);
    REQUIRE(r.result.root_cause);
    CHECK(r.result.root_cause->rank == 1);
    CHECK(r.result.root_cause->exit_code == 3);
    CHECK(r.result.root_cause->last_stderr == std::vector<std::string>{"rank one is failing"});
    REQUIRE(r.result.other_failures.size() == 2);
    for (const auto& w : r.result.other_failures) {
      CHECK(w.signal == SIGTERM);
      CHECK(w.stopped_by_agent);
    }
    CHECK(r.err.find("root cause: rank 1 (local rank 1") != std::string::npos);
    CHECK(r.err.find("exit code 3") != std::string::npos);
    CHECK(r.err.find("| rank one is failing") != std::string::npos);
  }

  TEST_CASE("worker killed by SIGKILL or SIGSEGV: 128+N and the signal named") {
    for (auto [sig, name] : {std::pair{SIGKILL, "SIGKILL"}, std::pair{SIGSEGV, "SIGSEGV"}}) {
      CAPTURE(name);
      TempDir t;
      auto plan = sh_plan(2,
                          fmt::format("if [ \"$RANK\" = 0 ]; then while [ ! -e \"$T/up.1\" ]; do sleep 0.02; done;"
                                      " kill -{} $$; fi; touch \"$T/up.$RANK\"; exec sleep 60",
                                      sig),
                          t);
      auto r = run_agent(options(plan, t), t);
      CHECK(r.rc == 128 + sig);
      REQUIRE(r.result.root_cause);
      CHECK(r.result.root_cause->rank == 0);
      CHECK(r.result.root_cause->signal == sig);
      CHECK(r.err.find(name) != std::string::npos);
    }
  }

  TEST_CASE("a worker that ignores SIGTERM is SIGKILLed after the grace period") {
    TempDir t;
    auto plan = sh_plan(2,
                        "if [ \"$RANK\" = 0 ]; then while [ ! -e \"$T/up.1\" ]; do sleep 0.02; done; exit 1; fi;"
                        " trap '' TERM; touch \"$T/up.1\"; exec sleep 60",
                        t);
    auto o = options(plan, t);
    o.plan.spec.grace_s = 0.3;
    auto r = run_agent(o, t);
    CHECK(r.rc == 1);
    REQUIRE(r.result.other_failures.size() == 1);
    CHECK(r.result.other_failures[0].rank == 1);
    CHECK(r.result.other_failures[0].signal == SIGKILL);
    CHECK(r.err.find("grace period: SIGKILL") != std::string::npos);
  }

  TEST_CASE("grandchildren die with their worker") {
    TempDir t;
    auto plan = sh_plan(2,
                        "sleep 120 & echo $! > \"$T/gc.$RANK\";"
                        " if [ \"$RANK\" = 0 ]; then exit 0; fi;"
                        " while [ ! -s \"$T/gc.0\" ]; do sleep 0.02; done; exit 4",
                        t);
    auto r = run_agent(options(plan, t), t);
    CHECK(r.rc == 4);
    for (int rank = 0; rank < 2; ++rank) {
      pid_t gc = static_cast<pid_t>(std::stol(slurp(t.path / ("gc." + std::to_string(rank)))));
      CHECK(wait_until([&] { return !pid_alive(gc); }, 20));
    }
  }

  TEST_CASE("SIGUSR1 is forwarded as-is; SIGINT stops the job with 130; SIGTERM with 143") {
    for (int sig : {SIGUSR1, SIGINT, SIGTERM, SIGHUP}) {
      CAPTURE(sig);
      TempDir t;
      auto plan = sh_plan(3,
                          // Rank 0 fails only once every rank has seen SIGUSR1, so the
                          // agent's stop cannot overtake a rank's USR1 trap.
                          "trap 'echo got-usr1 > \"$T/usr1.$RANK\"' USR1;"
                          " trap 'echo got-int > \"$T/int.$RANK\"; exit 0' INT TERM HUP;"
                          " touch \"$T/up.$RANK\"; while :; do sleep 0.05;"
                          " if [ \"$RANK\" = 0 ] && [ -e \"$T/usr1.0\" ] && [ -e \"$T/usr1.1\" ]"
                          " && [ -e \"$T/usr1.2\" ]; then exit 7; fi; done",
                          t);
      auto o = options(plan, t);
      pid_t a = fork_agent(o, t);
      REQUIRE(wait_until([&] { return all_files(t, "up.", 3); }, 30));
      ::kill(a, sig);
      int rc = wait_child(a, 60);
      if (sig == SIGUSR1) {
        CHECK(rc == 7);
        CHECK(all_files(t, "usr1.", 3) == true);
      } else {
        CHECK(rc == 128 + sig);
        CHECK(all_files(t, "int.", 3) == true);
        CHECK(slurp(t.path / "agent.err").find("interrupted by") != std::string::npos);
      }
    }
  }

  TEST_CASE("a second SIGINT kills workers that ignore the first") {
    TempDir t;
    auto plan = sh_plan(2, "trap '' INT TERM; touch \"$T/up.$RANK\"; exec sleep 120", t);
    auto o = options(plan, t);
    o.plan.spec.grace_s = 300;  // only the second SIGINT can end this run in time
    pid_t a = fork_agent(o, t);
    REQUIRE(wait_until([&] { return all_files(t, "up.", 2); }, 30));
    ::kill(a, SIGINT);
    REQUIRE(wait_until([&] { return slurp(t.path / "agent.err").find("stopping") != std::string::npos; }, 30));
    ::kill(a, SIGINT);
    int rc = wait_child(a, 60);
    CHECK(rc == 130);
    CHECK(slurp(t.path / "agent.err").find("again: killing") != std::string::npos);
    if (rc < 0) ::kill(a, SIGKILL), wait_child(a, 10);
  }

  TEST_CASE("restarts: the restart count reaches the env; success ends it") {
    TempDir t;
    auto plan = sh_plan(2,
                        "echo \"$TORCHELASTIC_RESTART_COUNT $DTRAIN_GENERATION\" >> \"$T/count.$RANK\";"
                        " touch \"$T/up.$RANK.$DTRAIN_GENERATION\";"
                        " if [ \"$DTRAIN_GENERATION\" -lt 2 ] && [ \"$RANK\" = 1 ]; then"
                        " while [ ! -e \"$T/up.0.$DTRAIN_GENERATION\" ]; do sleep 0.02; done; exit 4; fi;"
                        " if [ \"$DTRAIN_GENERATION\" -lt 2 ]; then exec sleep 60; fi",
                        t);
    auto o = options(plan, t);
    o.plan.spec.restart.max_restarts = 3;
    o.plan.spec.restart.backoff_s = 0.05;
    auto r = run_agent(o, t);
    CHECK(r.rc == 0);
    CHECK(r.result.restarts == 2);
    CHECK(slurp(t.path / "count.0") == "0 0\n1 1\n2 2\n");
    CHECK(slurp(t.path / "count.1") == "0 0\n1 1\n2 2\n");
    CHECK(r.err.find("restarting the group (1/3)") != std::string::npos);
  }

  TEST_CASE("restarts used up: exit with the root cause") {
    TempDir t;
    auto plan = sh_plan(1, "echo x >> \"$T/count\"; exit 5", t);
    auto o = options(plan, t);
    o.plan.spec.restart.max_restarts = 2;
    auto r = run_agent(o, t);
    CHECK(r.rc == 5);
    CHECK(r.result.restarts == 2);
    CHECK(slurp(t.path / "count") == "x\nx\nx\n");
    CHECK(r.err.find("after 2 restart(s)") != std::string::npos);
  }

  TEST_CASE("agent SIGKILLed: no process of the job survives") {
    TempDir t;
    std::string marker = unique_marker();
    auto plan = sh_plan(3, "sleep 300 & touch \"$T/up.$RANK\"; exec sleep 301", t);
    plan.spec.env["DTRAIN_TEST_MARKER"] = marker;
    pid_t a = fork_agent(options(plan, t), t);
    REQUIRE(wait_until([&] { return all_files(t, "up.", 3); }, 30));
    // 3 workers + 3 background sleeps; a `touch` that is still exiting may be seen for a moment.
    CHECK(wait_until([&] { return procs_with_env(marker).size() == 6; }, 30));
    ::kill(a, SIGKILL);
    CHECK(wait_child(a, 30) == 128 + SIGKILL);
    CHECK(wait_until([&] { return procs_with_env(marker).empty(); }, 30));
    CHECK(procs_with_env(marker).empty());
  }

  TEST_CASE("8 ranks x 10,000 lines: no mixed lines, nothing lost, logs complete") {
    TempDir t;
    auto plan = sh_plan(8,
                        "awk -v r=\"$RANK\" 'BEGIN { for (i = 0; i < 10000; i++) printf \"rank %d line %d "
                        "abcdefghijklmnopqrstuvwxyz0123456789\\n\", r, i;"
                        " for (i = 0; i < 100; i++) printf \"err %d %d\\n\", r, i > \"/dev/stderr\";"
                        " printf \"tail-%d-no-newline\", r }'",
                        t);
    auto o = options(plan, t);
    o.plan.spec.output.log_dir = (t.path / "logs").string();
    auto r = run_agent(o, t);
    REQUIRE(r.rc == 0);
    std::regex line_re(R"(\[0/(\d)\] rank (\d) line (\d+) abcdefghijklmnopqrstuvwxyz0123456789)");
    std::regex tail_re(R"(\[0/(\d)\] tail-(\d)-no-newline)");
    std::vector<int> next(8, 0), tails(8, 0);
    int bad = 0;
    for (const auto& l : lines_of(r.out)) {
      std::smatch m;
      if (std::regex_match(l, m, line_re) && m[1] == m[2]) {
        int rank = std::stoi(m[1]);
        if (std::stoi(m[3]) != next[rank]) ++bad;
        ++next[rank];
      } else if (std::regex_match(l, m, tail_re) && m[1] == m[2]) {
        ++tails[std::stoi(m[1])];
      } else {
        ++bad;
      }
    }
    CHECK(bad == 0);
    for (int rank = 0; rank < 8; ++rank) {
      CAPTURE(rank);
      CHECK(next[rank] == 10000);
      CHECK(tails[rank] == 1);
      auto log = slurp(t.path / "logs" / "test-run" / "attempt-0" / ("rank-" + std::to_string(rank) + ".out"));
      auto ll = lines_of(log);
      REQUIRE(ll.size() == 10001);
      CHECK(ll[9999] == fmt::format("rank {} line 9999 abcdefghijklmnopqrstuvwxyz0123456789", rank));
      CHECK(ll[10000] == fmt::format("tail-{}-no-newline", rank));
      auto el = lines_of(slurp(t.path / "logs" / "test-run" / "attempt-0" / ("rank-" + std::to_string(rank) + ".err")));
      CHECK(el.size() == 100);
    }
    // stderr stays on stderr, tagged
    int err_lines = 0;
    for (const auto& l : lines_of(r.err)) err_lines += l.rfind("[0/", 0) == 0 && l.find("] err ") != std::string::npos;
    CHECK(err_lines == 800);
    CHECK(fs::exists(t.path / "logs" / "test-run" / "plan.json"));
  }

  TEST_CASE("terminal filter, custom tag, no tag, timestamps") {
    TempDir t;
    auto plan = sh_plan(4, "echo \"hello from $RANK\"", t);
    SUBCASE("--ranks 0,3 with logs keeping all") {
      auto o = options(plan, t);
      o.output.terminal_ranks = std::set<int>{0, 3};
      o.plan.spec.output.log_dir = (t.path / "logs").string();
      auto r = run_agent(o, t);
      REQUIRE(r.rc == 0);
      auto ls = lines_of(r.out);
      std::sort(ls.begin(), ls.end());
      CHECK(ls == std::vector<std::string>{"[0/0] hello from 0", "[0/3] hello from 3"});
      CHECK(slurp(t.path / "logs/test-run/attempt-0/rank-2.out") == "hello from 2\n");
    }
    SUBCASE("custom format") {
      auto o = options(plan, t);
      o.plan.spec.output.tag_format = "{rank}.{local_rank}@{node}:{stream}> ";
      auto r = run_agent(o, t);
      CHECK(r.out.find("2.2@0:stdout> hello from 2\n") != std::string::npos);
    }
    SUBCASE("no tag") {
      auto o = options(plan, t);
      o.plan.spec.output.tag = false;
      auto r = run_agent(o, t);
      auto ls = lines_of(r.out);
      std::sort(ls.begin(), ls.end());
      CHECK(ls == std::vector<std::string>{"hello from 0", "hello from 1", "hello from 2", "hello from 3"});
    }
    SUBCASE("timestamps") {
      auto o = options(plan, t);
      o.plan.spec.output.timestamps = true;
      auto r = run_agent(o, t);
      std::regex re(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} \[0/\d\] hello from \d)");
      for (const auto& l : lines_of(r.out)) CHECK(std::regex_match(l, re));
    }
  }

  TEST_CASE("bad command: not found 127, not executable 126, bad interpreter through the shim") {
    TempDir t;
    SUBCASE("not found") {
      auto plan = sh_plan(2, "", t);
      plan.spec.command = {"dtrain-no-such-command-xyz"};
      auto r = run_agent(options(plan, t), t);
      CHECK(r.rc == 127);
      CHECK(r.err.find("command not found: 'dtrain-no-such-command-xyz'") != std::string::npos);
    }
    SUBCASE("not executable") {
      write_file(t.path / "script.sh", "#!/bin/sh\necho hi\n", false);
      auto plan = sh_plan(2, "", t);
      plan.spec.command = {(t.path / "script.sh").string()};
      auto r = run_agent(options(plan, t), t);
      CHECK(r.rc == 126);
      CHECK(r.err.find("is not executable") != std::string::npos);
    }
    SUBCASE("interpreter missing: exec fails in the shim") {
      write_file(t.path / "script.sh", "#!/nonexistent/interpreter\necho hi\n", true);
      auto plan = sh_plan(2, "", t);
      plan.spec.command = {(t.path / "script.sh").string()};
      auto o = options(plan, t);
      o.plan.spec.restart.max_restarts = 3;  // an exec failure is not worth a restart
      auto r = run_agent(o, t);
      CHECK(r.rc == 127);
      CHECK(r.result.restarts == 0);
      REQUIRE(r.result.root_cause);
      CHECK(r.result.root_cause->exec_errno == ENOENT);
      CHECK(r.err.find("cannot execute") != std::string::npos);
    }
  }

  TEST_CASE("max_runtime_s stops the job with 124") {
    TempDir t;
    auto plan = sh_plan(2, "exec sleep 120", t);
    auto o = options(plan, t);
    o.plan.spec.max_runtime_s = 0.5;
    auto r = run_agent(o, t);
    CHECK(r.rc == dtrain::exit_code::max_runtime);
    CHECK(r.err.find("max_runtime_s 0.5 passed") != std::string::npos);
  }

  TEST_CASE("summary JSON") {
    TempDir t;
    auto plan = sh_plan(2, "if [ \"$RANK\" = 1 ]; then echo boom >&2; exit 9; fi; exec sleep 60", t);
    auto o = options(plan, t);
    o.summary_json = t / "summary.json";
    auto r = run_agent(o, t);
    CHECK(r.rc == 9);
    auto js = slurp(t.path / "summary.json");
    CHECK(js.find("\"exit_code\": 9") != std::string::npos);
    CHECK(js.find("\"boom\"") != std::string::npos);
  }

  TEST_CASE("multi-node seam: go, peer failure and restart events from another thread") {
    SUBCASE("external start waits for go; a peer failure stops the group") {
      TempDir t;
      auto plan = sh_plan(2, "touch \"$T/up.$RANK\"; exec sleep 60", t);
      auto o = options(plan, t);
      o.external_start = true;
      std::vector<std::string> states;  // the loop thread's
      std::atomic<bool> starting{false}, go_posted{false}, ran_before_go{false};
      agent::AgentHooks hooks;
      hooks.on_state = [&](agent::JobState s, int g) {
        states.push_back(fmt::format("{}:{}", agent::state_name(s), g));
        if (s == agent::JobState::starting) starting = true;
        if (s == agent::JobState::running && !go_posted) ran_before_go = true;
      };
      int out = ::open((t.path / "o").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      o.output.stdout_fd = out;
      o.output.stderr_fd = out;
      agent::Agent a(o, hooks);
      std::thread peer([&] {
        // the agent waits in generation 0's `starting` for its go: nothing runs before it
        bool waits = wait_until([&] { return starting.load(); }, 30);
        CHECK(waits);
        CHECK_FALSE(fs::exists(t.path / "up.0"));
        go_posted = true;
        a.post(agent::Event::go(0));
        if (wait_until([&] { return all_files(t, "up.", 2); }, 30)) {
          agent::Event e;
          e.kind = agent::Event::Kind::peer_failed;
          e.node_rank = 1;
          e.exit_code = 6;
          a.post(e);
        }
      });
      int rc = a.run();
      peer.join();
      ::close(out);
      CHECK(rc == 6);
      CHECK_FALSE(ran_before_go);
      CHECK(states.front() == "starting:0");
      CHECK(std::find(states.begin(), states.end(), "running:0") != states.end());
      CHECK(states.back() == "done:0");
    }
    SUBCASE("restart event moves the group to the next generation") {
      TempDir t;
      auto plan = sh_plan(1,
                          "echo $DTRAIN_GENERATION >> \"$T/gen\"; if [ $DTRAIN_GENERATION = 0 ]; then touch \"$T/up\";"
                          " exec sleep 60; fi",
                          t);
      auto o = options(plan, t);
      int out = ::open((t.path / "o").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      o.output.stdout_fd = out;
      o.output.stderr_fd = out;
      int failures = 0;
      agent::AgentHooks hooks;
      hooks.on_local_failure = [&](const agent::WorkerExit&, int) { ++failures; };
      agent::Agent a(o, hooks);
      std::thread peer([&] {
        if (wait_until([&] { return fs::exists(t.path / "up"); }, 30)) {
          agent::Event e;
          e.kind = agent::Event::Kind::restart;
          e.generation = 1;
          a.post(e);
        }
      });
      int rc = a.run();
      peer.join();
      ::close(out);
      CHECK(rc == 0);
      CHECK(failures == 0);  // stopped by the agent, not a local failure
      CHECK(slurp(t.path / "gen") == "0\n1\n");
      CHECK(a.result().restarts == 1);
    }
  }
}
