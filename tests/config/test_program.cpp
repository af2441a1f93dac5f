// The program of a torchrun-style launch as the job's command (config/src/program.cpp).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "dtrain/config/errors.hpp"
#include "config_test.hpp"
#include "dtrain/config/program.hpp"

using namespace dtrain::config;
using dtrain::config::test::flags;
using dtrain::config::test::spec_of;
namespace fs = std::filesystem;

namespace {

Environment path_env(const std::string& path) {
  Environment e;
  e.vars["PATH"] = path;
  return e;
}

std::string what(const Program& p, const Environment& env) {
  try {
    (void)program_command(p, env);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_SUITE("config::program") {
  TEST_CASE("a script runs as PYTHON -u SCRIPT ARGS; a module with -m; a program as it is") {
    Program p;
    p.words = {"train.py", "--epochs", "2"};
    p.python = "/bin/sh";
    auto c = program_command(p, path_env("/usr/bin:/bin"));
    CHECK(c.command == std::vector<std::string>{"/bin/sh", "-u", "train.py", "--epochs", "2"});
    CHECK(c.name == "train");
    CHECK(c.python_source == "--python");
    p.mode = Program::Mode::module;
    p.words = {"pkg.train", "-x"};
    c = program_command(p, path_env("/usr/bin:/bin"));
    CHECK(c.command == std::vector<std::string>{"/bin/sh", "-u", "-m", "pkg.train", "-x"});
    CHECK(c.name == "pkg.train");
    Program q;
    q.mode = Program::Mode::program;
    q.words = {"./bin/worker", "1"};
    c = program_command(q, path_env(""));
    CHECK(c.command == q.words);
    CHECK(c.name == "worker");
    CHECK(c.python.empty());
  }

  TEST_CASE("the interpreter: python3 as PATH finds it, --python by name or path; else what to do") {
    Program p;
    p.words = {"t.py"};
    p.python = "sh";
    CHECK(program_command(p, path_env("/nonexistent:/bin")).python == "/bin/sh");
    p.python.reset();
    CHECK(what(p, path_env("/nonexistent")) ==
          "--python: python3 is not on PATH (/nonexistent); give the interpreter with --python PATH (or PYTHON_EXEC), "
          "or --no-python to run the program itself");
    p.python = "/nonexistent/python";
    CHECK(what(p, path_env("/bin")).find("--python: /nonexistent/python is not an executable file;") == 0);
    // torchrun's PYTHON_EXEC when there is no --python; --python wins over it
    Environment e = path_env("/bin");
    e.vars["PYTHON_EXEC"] = "/bin/sh";
    p.python.reset();
    ProgramCommand pc = program_command(p, e);
    CHECK(pc.command == std::vector<std::string>{"/bin/sh", "-u", "t.py"});
    CHECK(pc.python_source == "PYTHON_EXEC");
    p.python = "true";
    CHECK(program_command(p, e).python == "/bin/true");
    e.vars["PYTHON_EXEC"] = "python9";
    p.python.reset();
    CHECK(what(p, e).find("PYTHON_EXEC: PYTHON_EXEC=python9 is not an executable file on PATH;") == 0);
    CHECK(find_on_path("sh", "/nonexistent::/bin") == "/bin/sh");
  }

  TEST_CASE("flags that contradict the program form are refused, naming the flag") {
    Program p;
    p.mode = Program::Mode::module;
    p.words = {"m"};
    p.run_path = true;
    CHECK(what(p, path_env("/bin")).find("--run-path: runs a script by its path") != std::string::npos);
    Program q;
    q.mode = Program::Mode::program;
    q.words = {"prog"};
    q.python = "/bin/sh";
    CHECK(what(q, path_env("/bin")).find("--python: names the interpreter of a script or module") != std::string::npos);
  }

  TEST_CASE("a script that is not there, relative to the workdir, is refused") {
    auto dir = fs::temp_directory_path() / ("dtrain-prog-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "train.py") << "";
    JobSpec spec;
    spec.workdir = dir.string();
    Program p;
    p.words = {"train.py"};
    CHECK_NOTHROW(check_script(p, spec));
    p.words = {"other.py"};
    CHECK_THROWS_WITH_AS(check_script(p, spec), doctest::Contains("other.py: no such file (in workdir"), SpecError);
    p.mode = Program::Mode::module;  // a module is found by the interpreter, not here
    CHECK_NOTHROW(check_script(p, spec));
    fs::remove_all(dir);
  }

  TEST_CASE("--nnodes and --nproc-per-node as torchrun writes them") {
    auto nodes = [](const char* text) { return spec_of(R"({"command": ["a"]})", flags({{"--nnodes", text}})).cluster; };
    CHECK(nodes("3").instances == 3);
    CHECK(nodes("2:2").instances == 2);
    CHECK_FALSE(nodes("2:2").min_instances.has_value());
    CHECK(nodes("1:4").instances == 4);  // elastic
    CHECK(nodes("1:4").min_instances == 1);
    // the range is cluster.instances' rule, named by the flag
    CHECK_THROWS_WITH_AS(nodes("4:2"), doctest::Contains("--nnodes: min 4 is more than max 2"), SpecError);
    CHECK_THROWS_WITH_AS(nodes("0:2"), doctest::Contains("--nnodes: 0 is out of range"), SpecError);
    CHECK_THROWS_WITH_AS(nodes("two"), doctest::Contains("--nnodes: 'two' is not a node count"), SpecError);
    Overrides n = flags({{"--nproc-per-node", "gpu"}});
    CHECK(n.nproc_mode == "gpu");
    (void)set_flag(n, "--nproc-per-node", "4");
    CHECK(n.nproc_per_node == 4);
    CHECK_FALSE(n.nproc_mode.has_value());
    CHECK_THROWS_WITH_AS(set_flag(n, "--nproc-per-node", "x"), doctest::Contains("'x' is not a worker count"), SpecError);
  }
}
