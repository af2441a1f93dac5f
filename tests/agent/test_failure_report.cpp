// failure_report.cpp: a failed worker's own words (first exception, error file, a peer's failure its
// collectives saw, the interpreter hint).
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent_test_util.hpp"
#include "failure_report.hpp"

using namespace dtrain::agent;
using agent_test::TempDir;
using agent_test::write_file;

namespace {

std::vector<std::string> catch_first(const std::vector<std::string>& lines) {
  FirstException f;
  for (const auto& l : lines) f.line(l);
  return f.lines();
}

}  // namespace

TEST_SUITE("agent::failure_report") {
  TEST_CASE("the first exception block, through its exception line, whatever follows") {
    std::vector<std::string> block = {"Traceback (most recent call last):", "  File \"t.py\", line 9, in <module>",
                                      "    main()", "  File \"t.py\", line 5, in main",
                                      "    raise ValueError(\"bad\")", "ValueError: bad"};
    std::vector<std::string> lines = {"step 1", "step 2"};
    lines.insert(lines.end(), block.begin(), block.end());
    for (int i = 0; i < 15; ++i) lines.push_back(fmt::format("atexit line {}", i));
    CHECK(catch_first(lines) == block);
    SUBCASE("a second traceback later does not replace the first") {
      lines.push_back("Traceback (most recent call last):");
      lines.push_back("  File \"u.py\", line 1");
      lines.push_back("KeyError: 'x'");
      CHECK(catch_first(lines) == block);
    }
    SUBCASE("none: empty") { CHECK(catch_first({"a", "b", "Error: not a traceback"}).empty()); }
    SUBCASE("a stream that ends inside the block keeps what came") {
      CHECK(catch_first({"Traceback (most recent call last):", "  File \"x\""}).size() == 2);
    }
  }

  TEST_CASE("a long traceback keeps its head and tail and says how much was left out") {
    std::vector<std::string> lines = {"Traceback (most recent call last):"};
    for (int i = 0; i < 1000; ++i) lines.push_back(fmt::format("  File \"r.py\", line {}, in f", i));
    lines.push_back("RecursionError: maximum recursion depth exceeded");
    auto got = catch_first(lines);
    CHECK(got.size() == FirstException::kHead + FirstException::kTail + 1);
    CHECK(got.front() == lines.front());
    CHECK(got.back() == lines.back());
    CHECK(got[FirstException::kHead] == fmt::format("... ({} lines left out)", lines.size() - FirstException::kHead - FirstException::kTail));
  }

  TEST_CASE("the real exception line behind 10^5 repeated headers, or headers between frames") {
    const std::vector<std::string> block = {"Traceback (most recent call last):", "  File \"t.py\", line 3, in <module>",
                                            "    raise ValueError(\"root\")", "ValueError: root"};
    std::vector<std::string> lines(100000, "[rank 0] Traceback (most recent call last):");
    lines.insert(lines.end(), block.begin() + 1, block.end());
    lines.push_back("after");
    auto got = catch_first(lines);
    CHECK(got == std::vector<std::string>{lines.front(), "... (99999 more \"Traceback\" header lines left out)",
                                          block[1], block[2], block[3]});
    SUBCASE("headers between frames: bounded, the exception line last") {
      lines.clear();
      for (int i = 0; i < 100000; ++i) {
        lines.push_back("Traceback (most recent call last):");
        lines.push_back(fmt::format("  File \"r.py\", line {}", i));
      }
      lines.push_back("KeyError: 'root'");
      got = catch_first(lines);
      CHECK(got.size() == FirstException::kHead + FirstException::kTail + 1);
      CHECK(got.back() == "KeyError: 'root'");
    }
    SUBCASE("the summary names it") {
      AgentResult r;
      r.exit_code = 1;
      WorkerExit w;
      w.exit_code = 1;
      w.first_exception = got;
      r.root_cause = w;
      CHECK(summary_text(r).find("| ValueError: root\n") != std::string::npos);
    }
  }

  TEST_CASE("torch's error file: message, traceback and timestamp; the other shapes") {
    TempDir t;
    auto p = t / "error.json";
    write_file(p, R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  x\nValueError: bad\n", "timestamp": "1700000000"}}})");
    auto r = read_error_file(p);
    REQUIRE(r);
    CHECK(r->file == p);
    CHECK(r->message == "ValueError: bad");
    CHECK(r->traceback == "Traceback (most recent call last):\n  x\nValueError: bad\n");
    CHECK(r->timestamp == "1700000000");
    write_file(p, R"({"message": "SIGSEGV in worker"})");
    REQUIRE(read_error_file(p));
    CHECK(read_error_file(p)->message == "SIGSEGV in worker");
    write_file(p, "not json");
    CHECK_FALSE(read_error_file(p));
    write_file(p, R"({"other": 1})");
    CHECK_FALSE(read_error_file(p));
    CHECK_FALSE(read_error_file(t / "absent.json"));
  }

  TEST_CASE("prepare_error_file: <attempt>/<rank>/error.json, created, a stale file removed") {
    TempDir t;
    auto f = prepare_error_file(t / "attempt-0", 3);
    CHECK(f == t.path / "attempt-0" / "3" / "error.json");
    CHECK(std::filesystem::is_directory(f.parent_path()));
    write_file(f, "{}");
    CHECK(prepare_error_file(t / "attempt-0", 3) == f);
    CHECK_FALSE(std::filesystem::exists(f));
  }

  TEST_CASE("a peer's failure in the collectives' words: the rank named last, never the worker's own") {
    // c_allreduce on rank 1 (exit 14): a chain of reports that ends with the rank that died
    std::string chain = "rank 1: allreduce float32 failed: peer failure (4): broadcast(count 100000, float32, root 0) #181 "
                        "on rank 1: rank 0 failed: allreduce(count 100000, float32, sum) #181 on rank 0: rank 2 (address "
                        "127.0.0.1, port 34279) failed: rank 2: allreduce #181 on rank 2: rank 3 (pid 8088) died; it had "
                        "reached barrier #180";
    CHECK(peer_failure_in(chain, 1) == 3);
    CHECK(peer_failure_in("allreduce #3 on rank 0: rank 2 (address 10.0.0.2, port 5) closed the connection (exited, "
                          "failed, or destroyed its communicator)", 0) == 2);
    CHECK(peer_failure_in("rank 1 destroyed its communicator instead of joining", 0) == 1);
    CHECK(peer_failure_in("dtrain allreduce: something [peer (4)]", 0) == -1);
    CHECK(peer_failure_in("RuntimeError: [pair.cc:598] Connection closed by peer [127.0.0.1]:30112", 0) == -1);
    CHECK_FALSE(peer_failure_in("ValueError: bad value on rank 1", 1));
    CHECK_FALSE(peer_failure_in("rank 2 died", 2));  // itself: not a peer
  }

  TEST_CASE("explain: the error file first, a peer's failure, never for a worker killed by a signal") {
    TempDir t;
    WorkerExit w;
    w.rank = 1;
    w.exit_code = 14;
    w.last_stderr = {"rank 1: allreduce failed: peer failure (4): ... rank 3 (pid 9) died"};
    explain(w, "");
    CHECK(w.peer_failure == 3);
    CHECK(evidence_of(w).heading == "last lines of its stderr");
    WorkerExit k = w;
    k.peer_failure.reset();
    k.exit_code = 0;
    k.signal = 9;
    explain(k, "");
    CHECK_FALSE(k.peer_failure);
    WorkerExit e;
    e.rank = 0;
    e.exit_code = 1;
    e.error_file = t / "error.json";
    write_file(e.error_file, R"({"message": {"message": "KeyError: 'lr'", "extraInfo": {"py_callstack": "Traceback (most recent call last):\nKeyError: 'lr'\n", "timestamp": "1"}}})");
    e.first_exception = {"Traceback (most recent call last):", "KeyError: 'lr'"};
    explain(e, "");
    REQUIRE(e.error);
    auto ev = evidence_of(e);
    CHECK(ev.heading == fmt::format("its error file ({})", e.error_file));
    CHECK(ev.lines == std::vector<std::string>{"Traceback (most recent call last):", "KeyError: 'lr'"});
    e.error.reset();
    e.error_file.clear();
    CHECK(evidence_of(e).heading == "first exception on its stderr");
  }

  TEST_CASE("ModuleNotFoundError: a hint naming the interpreter and how to pick another") {
    WorkerExit w;
    w.rank = 0;
    w.exit_code = 1;
    w.first_exception = {"Traceback (most recent call last):", "  File \"train.py\", line 1, in <module>",
                         "ModuleNotFoundError: No module named 'torch'"};
    explain(w, "/opt/py/bin/python3");
    CHECK(w.hint.find("/opt/py/bin/python3") != std::string::npos);
    CHECK(w.hint.find("--python PATH") != std::string::npos);
    CHECK(w.hint.find("PYTHON_EXEC") != std::string::npos);
    WorkerExit v = w;
    v.hint.clear();
    v.first_exception.back() = "ValueError: no";
    explain(v, "/opt/py/bin/python3");
    CHECK(v.hint.empty());
  }

  TEST_CASE("the interpreter of a command: python* along PATH, a script's #! line, else none") {
    TempDir t;
    std::filesystem::create_directories(t / "bin");
    write_file(t.path / "bin" / "python3", "#!/bin/sh\n", true);
    write_file(t.path / "bin" / "tool", "#!/usr/bin/env python3\nprint(1)\n", true);
    write_file(t.path / "bin" / "direct", "#!/usr/bin/python3.11 -u\n", true);
    write_file(t.path / "bin" / "shell", "#!/bin/sh\n", true);
    std::string path = (t.path / "bin").string() + ":/usr/bin:/bin";
    CHECK(python_interpreter({"python3", "train.py"}, path, t.path) == (t.path / "bin" / "python3").string());
    CHECK(python_interpreter({"tool"}, path, t.path) == (t.path / "bin" / "python3").string());
    CHECK(python_interpreter({"direct"}, path, t.path) == "/usr/bin/python3.11");
    CHECK(python_interpreter({"shell"}, path, t.path).empty());
    CHECK(python_interpreter({"python9.9-absent"}, path, t.path) == "python9.9-absent");
  }

  TEST_CASE("the JSON summary survives bytes that are not UTF-8 (a worker's, or a line cut mid-character)") {
    AgentResult r;
    r.exit_code = 1;
    WorkerExit w;
    w.rank = 0;
    w.exit_code = 1;
    w.last_stderr = {"caf\xc3", "\xff\xfe binary"};
    w.first_exception = {"Traceback (most recent call last):", "ValueError: caf\xc3"};
    r.root_cause = w;
    std::string js;
    REQUIRE_NOTHROW(js = summary_json(r));
    auto j = nlohmann::json::parse(js, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j["root_cause"]["error"]["source"] == "first_exception");
    CHECK(j["root_cause"]["last_stderr"][0] == "caf\xef\xbf\xbd");  // U+FFFD
  }
}
