// Where a worker's output goes (agent/src/output_router.cpp, through the agent's Terminal): whole
// lines, tagged, to the terminal however the bytes were cut; the raw bytes to the log files; the
// ranks and streams kept off the terminal; the stderr tail and first exception for the summary.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "agent_test_util.hpp"
#include "output_router.hpp"
#include "terminal.hpp"
#include "visible_text.hpp"

using namespace dtrain::agent;
using agent_test::TempDir;

namespace {

// A terminal writing to two files of a temp dir.
struct Files {
  TempDir t;
  int out = ::open((t.path / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = ::open((t.path / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  Terminal terminal{out, err, 0};
  ~Files() {
    ::close(out);
    ::close(err);
  }
  std::string stdout_text() const { return agent_test::slurp(t.path / "out"); }
  std::string stderr_text() const { return agent_test::slurp(t.path / "err"); }
};

void feed(OutputRouter& r, WorkerOutput& w, bool is_err, const std::string& s) { r.feed(w, is_err, s.data(), s.size()); }

}  // namespace

TEST_SUITE("agent::output_router") {
  TEST_CASE("whole lines, tagged, however the bytes were cut; the log file has the bytes as written") {
    Files f;
    OutputRouter router(dtrain::config::OutputSpec{}, OutputOptions{}, f.terminal);
    WorkerOutput w;
    router.open(w, {5, 1, 2}, f.t.path);
    feed(router, w, false, "hel");
    CHECK(f.stdout_text().empty());  // no whole line yet
    feed(router, w, false, "lo\nwor");
    feed(router, w, false, "ld\nno newline");
    router.end(w, false);
    f.terminal.flush();  // as the agent does once a stream ended
    CHECK(f.stdout_text() == "[1/5] hello\n[1/5] world\n[1/5] no newline\n");
    CHECK(agent_test::slurp(f.t.path / "rank-5.out") == "hello\nworld\nno newline");
  }

  TEST_CASE("the stderr tail keeps the last lines, cut short with a mark; the first exception is caught whole") {
    Files f;
    OutputRouter router(dtrain::config::OutputSpec{}, OutputOptions{}, f.terminal);
    WorkerOutput w;
    router.open(w, {0, 0, 0}, std::nullopt);
    feed(router, w, true, "Traceback (most recent call last):\n  File \"t.py\", line 1\nValueError: boom\n");
    for (int i = 0; i < 20; ++i) feed(router, w, true, "noise " + std::to_string(i) + "\n");
    feed(router, w, true, std::string(OutputRouter::kTailLineBytes + 100, 'x') + "\n");
    auto tail = w.stderr_tail();
    REQUIRE(tail.size() == OutputRouter::kLastLines);
    CHECK(tail.front() == "noise 11");
    CHECK(tail.back() == std::string(OutputRouter::kTailLineBytes, 'x') + " [... 100 more bytes cut]");
    // the summary cuts it again, counting every byte left out
    CHECK(visible_line(tail.back(), 1000) == std::string(1000, 'x') + " [... 3196 more bytes cut]");
    CHECK(w.first_exception() ==
          std::vector<std::string>{"Traceback (most recent call last):", "  File \"t.py\", line 1", "ValueError: boom"});
    CHECK(f.stderr_text().find("[0/0] noise 19\n") != std::string::npos);
  }

  TEST_CASE("ranks off the terminal, redirected streams and no tag: kept out, or shown bare, but logged") {
    Files f;
    OutputOptions o;
    o.terminal_ranks = std::set<int>{1};
    o.redirects.by_local_rank[1] = 2;  // local rank 1: stderr to the log file only
    dtrain::config::OutputSpec spec;
    spec.tag = false;
    OutputRouter router(spec, o, f.terminal);
    WorkerOutput hidden, shown;
    router.open(hidden, {0, 0, 0}, f.t.path);
    router.open(shown, {1, 0, 1}, f.t.path);
    feed(router, hidden, false, "from rank 0\n");
    feed(router, shown, false, "from rank 1\n");
    feed(router, shown, true, "rank 1's stderr\n");
    CHECK(f.stdout_text() == "from rank 1\n");
    CHECK(f.stderr_text().empty());
    CHECK(agent_test::slurp(f.t.path / "rank-0.out") == "from rank 0\n");
    CHECK(agent_test::slurp(f.t.path / "rank-1.err") == "rank 1's stderr\n");
    CHECK(shown.stderr_tail() == std::vector<std::string>{"rank 1's stderr"});  // the summary still has it
  }
}

TEST_SUITE("agent::terminal") {
  TEST_CASE("the progress line: what it says in each state") {
    CHECK(progress_text({JobState::starting, 0, 0, 0, 4, false}) == "starting 4 worker(s)");
    CHECK(progress_text({JobState::starting, 0, 0, 0, 4, true}) == "waiting for the other nodes");
    CHECK(progress_text({JobState::running, 1, 3, 3, 4, false}) == "3/4 workers running (restart 1/3)");
    CHECK(progress_text({JobState::stopping, 0, 0, 2, 4, false}) == "stopping (2 worker(s) left)");
    CHECK(progress_text({JobState::restarting, 2, 3, 0, 4, false}) == "restarting 2/3");
    CHECK(progress_text({JobState::done, 0, 0, 0, 4, false}).empty());
  }

  TEST_CASE("forced on where stderr is no terminal: one line per change, never cutting into a worker's") {
    TempDir t;
    int out = ::open((t.path / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = ::open((t.path / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    Terminal term(out, err, 1);
    std::string state = "starting 2 worker(s)";
    term.set_progress_source([&] { return state; });
    term.update_progress();
    term.update_progress();  // unchanged: not repeated
    term.line(true, "", "[0/0] ", "a worker's line");
    term.say("dtrain: a line of the agent's");  // the worker's line first
    state = "2/2 workers running";
    term.update_progress();
    ::close(out);
    ::close(err);
    CHECK(agent_test::slurp(t.path / "err") ==
          "dtrain: starting 2 worker(s)\n[0/0] a worker's line\ndtrain: a line of the agent's\ndtrain: 2/2 workers running\n");
  }
}
