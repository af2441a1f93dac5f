// Hang diagnosis: diagnose() over progress pages (no processes), then through the real binary with
// workers of the collectives library (examples/c_allreduce --stall-rank): `dtrain status` shows
// where each rank is, and output.hang_timeout_s ends a hung job with 70 and the stuck ranks named.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../cli/run_binary.hpp"
#include "agent_test_util.hpp"
#include "dtrain/agent/hang.hpp"

using dtrain::agent::diagnose;
using dtrain::agent::RankProgress;
namespace pg = dtrain::progress;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kS = 1000000000;

RankProgress in_call(int rank, pg::Op op, std::uint64_t seq, std::uint64_t bytes, std::int64_t begin) {
  RankProgress r{rank, {}};
  r.page.valid = true;
  r.page.op = static_cast<std::uint32_t>(op);
  r.page.seq = seq;
  r.page.bytes = bytes;
  r.page.calls = seq;
  r.page.begin_ns = begin;
  return r;
}

RankProgress returned(int rank, pg::Op op, std::uint64_t seq, std::int64_t end) {
  RankProgress r = in_call(rank, op, seq, 64, end - 1);
  r.page.end_ns = end;
  return r;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// examples/c_allreduce, built with this test (C_ALLREDUCE, tests/agent/CMakeLists.txt).
fs::path c_allreduce() { return C_ALLREDUCE; }

}  // namespace

TEST_SUITE("agent::hang") {
  TEST_CASE("no rank past the threshold: not a hang, one line per rank") {
    std::int64_t now = 100 * kS;
    auto d = diagnose({in_call(0, pg::Op::allreduce, 3, 4 << 20, now - 2 * kS), returned(1, pg::Op::barrier, 2, now - kS),
                       RankProgress{2, {}}},
                      now, 10);
    CHECK_FALSE(d.hung);
    CHECK(d.verdict.empty());
    REQUIRE(d.lines.size() == 3);
    CHECK(d.lines[0] == "rank 0: in allreduce #3 (4.0 MiB) for 2.0 s");
    CHECK(d.lines[1] == "rank 1: last collective barrier #2 (64 B) returned 1.0 s ago");
    CHECK(d.lines[2] == "rank 2: unseen (no dtrain collective call yet)");
  }

  TEST_CASE("ranks stuck in one call, grouped; ranks behind them named as having stopped calling") {
    std::int64_t now = 100 * kS;
    auto d = diagnose({in_call(0, pg::Op::allreduce, 57, 4 << 20, now - 31 * kS),
                       in_call(1, pg::Op::allreduce, 57, 4 << 20, now - 30 * kS),
                       in_call(2, pg::Op::allreduce, 57, 4 << 20, now - 31 * kS),
                       returned(3, pg::Op::allreduce, 56, now - 32 * kS), RankProgress{4, {}}},
                      now, 30);
    CHECK(d.hung);
    CHECK(d.verdict == "no progress for 31 s: ranks 0-2 wait in allreduce #57 (4.0 MiB); rank 3 stopped calling: "
                       "its last collective, allreduce #56 (64 B), returned 32.0 s ago; rank 4 made no collective call (its Python stack shows where it is)");
    // the one furthest behind is the one they wait for: no call at all
    CHECK(d.culprit == 4);
    CHECK_FALSE(d.stopped);
    CHECK(d.blame == "never reached allreduce #57 (it made no dtrain collective call); ranks 0-2 wait in it");
  }

  TEST_CASE("a rank stopped by a signal for kStoppedAfterS is the culprit, whatever the threshold") {
    std::int64_t now = 100 * kS;
    RankProgress waiter = in_call(2, pg::Op::allreduce, 95, 4000, now - 3 * kS);
    RankProgress stopped = returned(3, pg::Op::allreduce, 94, now - 3 * kS);
    stopped.pid = 812, stopped.state = 'T', stopped.stopped_since_ns = now - 3 * kS;
    auto d = diagnose({waiter, stopped}, now, 30);
    CHECK(d.hung);
    CHECK(d.stopped);
    CHECK(d.culprit == 3);
    CHECK(d.blame == "never reached allreduce #95 (its last collective, allreduce #94 (64 B), returned 3.0 s ago); "
                     "rank 2 waits in it");
    CHECK(d.verdict.rfind("rank 3 (pid 812, state T stopped) never reached allreduce #95", 0) == 0);
    CHECK(d.lines[1].rfind("rank 3 (pid 812, state T stopped): last collective allreduce #94", 0) == 0);
    // seen stopped only just now: not yet
    stopped.stopped_since_ns = now - kS;
    CHECK_FALSE(diagnose({waiter, stopped}, now, 30).hung);
    // stopped by a debugger (t): left alone
    stopped.state = 't', stopped.stopped_since_ns = 0;
    CHECK_FALSE(diagnose({waiter, stopped}, now, 30).hung);
    // stopped in the call itself, the others in it too
    RankProgress inside = in_call(3, pg::Op::allreduce, 95, 4000, now - 4 * kS);
    inside.pid = 812, inside.state = 'T', inside.stopped_since_ns = now - 3 * kS;
    auto d2 = diagnose({waiter, inside}, now, 30);
    CHECK(d2.culprit == 3);
    CHECK(d2.blame == "is in allreduce #95 too, making no progress; rank 2 waits in it");
  }

  TEST_CASE("process_state reads /proc: this process runs; none for a pid that is gone") {
    CHECK(dtrain::agent::process_state(::getpid()) == 'R');
    CHECK(dtrain::agent::process_state(0) == 0);
    CHECK(dtrain::agent::state_text('T') == "T stopped");
  }

  TEST_CASE("the text a node publishes: its lines, then the verdict once stuck") {
    std::int64_t now = 100 * kS;
    auto ok = diagnose({in_call(0, pg::Op::barrier, 1, 0, now - kS)}, now, 10);
    CHECK(dtrain::agent::diagnosis_text(ok) == "rank 0: in barrier #1 (0 B) for 1.0 s");
    auto stuck = diagnose({in_call(0, pg::Op::barrier, 1, 0, now - 20 * kS)}, now, 10);
    CHECK(dtrain::agent::diagnosis_text(stuck) ==
          "rank 0: in barrier #1 (0 B) for 20.0 s\nstuck: no progress for 20 s: rank 0 waits in barrier #1 (0 B)");
  }

  TEST_CASE("ranks_text and bytes_text") {
    CHECK(dtrain::agent::ranks_text({0, 1, 2, 5, 7, 8}) == "0-2, 5, 7-8");
    CHECK(dtrain::agent::bytes_text(1000) == "1000 B");
    CHECK(dtrain::agent::bytes_text(3 << 10) == "3.0 KiB");
    CHECK(dtrain::agent::bytes_text(std::uint64_t(5) << 30) == "5.0 GiB");
  }

  TEST_CASE("dtrain status shows where each rank of a running job is") {
    dtrain::test::TempDir t;
    auto env = dtrain::test::base_env();
    env["TMPDIR"] = t.path.string();  // this test's registry of runs
    std::string job = t.write("job.json", fmt::format(R"({{"command": ["{}", "--count", "1000", "--iters", "4",
        "--stall-rank", "1", "--stall-at", "2"], "cluster": {{"procs_per_instance": 2}}, "grace_s": 1}})",
                                                      c_allreduce().string()));
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("TMPDIR", t.path.c_str(), 1);
      ::setenv("DTRAIN_TEST_GPUS", "0", 1);
      ::execl(DTRAIN_BIN, DTRAIN_BIN, "launch", "--no-progress", job.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // an iteration is 6 calls (2 allreduces, broadcast, allgather, reduce_scatter, barrier): iteration 2
    // begins with call 13, where rank 0 waits; rank 1 stopped after barrier #12
    std::string out;
    bool seen = agent_test::wait_until([&] {
      out = dtrain::test::run({DTRAIN_BIN, "status"}, env).out;
      return has(out, "rank 0: in allreduce #13 (3.9 KiB) for ") &&
             has(out, "rank 1: last collective barrier #12 (0 B) returned ");
    }, 60);
    CHECK_MESSAGE(seen, out);
    CHECK(has(out, fmt::format("agent pid {}", pid)));
    auto js = dtrain::test::run({DTRAIN_BIN, "status", "--json"}, env);
    CHECK(has(js.out, "\"runs\":[{\"run_id\":"));
    ::kill(pid, SIGTERM);
    CHECK(agent_test::wait_child(pid, 30) == 143);
    CHECK(has(dtrain::test::run({DTRAIN_BIN, "status"}, env).out, "no dtrain job runs on this machine"));
  }

  TEST_CASE("output.hang_timeout_s: a hung job fails with 70 and the summary names the stuck ranks") {
    dtrain::test::TempDir t;
    std::string job = t.write("job.json", fmt::format(R"({{"command": ["{}", "--count", "1000", "--iters", "4",
        "--stall-rank", "1", "--stall-at", "2"], "cluster": {{"procs_per_instance": 2}},
        "output": {{"hang_timeout_s": 2}}, "grace_s": 1}})", c_allreduce().string()));
    auto r = dtrain::test::run({DTRAIN_BIN, "launch", job, "--summary-json", (t.path / "s.json").string()});
    INFO(r.err);
    CHECK(r.status == 70);
    // rank 1 stopped calling: the rank the job hangs on, alive, is the root cause
    CHECK(has(r.err, "dtrain: job failed (exit status 70)"));
    CHECK(has(r.err, "  root cause: rank 1 (local rank 1, node 0, pid "));
    CHECK(has(r.err, "): hung (state S sleeping): never reached allreduce #13 (its last collective, barrier #12 (0 B), "
                     "returned "));
    CHECK(has(r.err, "  then: hang: no progress for "));
    CHECK(has(r.err, "rank 0 waits in allreduce #13 (3.9 KiB); rank 1 stopped calling: its last collective, "
                     "barrier #12 (0 B), returned "));
    CHECK(has(r.err, "where each rank of this node was:"));
    CHECK(has(r.err, "    rank 0: in allreduce #13"));
    CHECK(has(dtrain::test::read_file(t.path / "s.json"), "\"hang\": ["));
  }
}
