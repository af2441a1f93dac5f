// The torchrun-style command line of `dtrain plan` and `dtrain launch` (cli/command_line.cpp)
// through the real binary: options first, then the program and its own arguments; underscore
// spellings; an unknown option answered with a did-you-mean that never blames a job file.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan_run.hpp"

namespace {

// `dtrain plan --json ARGS...` that must succeed.
json plan_json(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = base_env()) {
  return dtrain::test::ok(dtrain::test::plan(args, env));
}

std::vector<std::string> command_of(const json& plan) { return plan["command"].get<std::vector<std::string>>(); }

}  // namespace

TEST_SUITE("cli::command_line") {
  TEST_CASE("a script after the options runs under the interpreter; its arguments are its own") {
    TempDir t;
    std::string script = t.write("train.py", "print('hi')\n");
    json j = plan_json({"--python", "/bin/sh", "--nproc-per-node", "2", script, "--epochs", "2", "--nproc-per-node", "9"});
    CHECK(command_of(j) == std::vector<std::string>{"/bin/sh", "-u", script, "--epochs", "2", "--nproc-per-node", "9"});
    CHECK(j["procs_per_instance"] == 2);
    CHECK(j["name"] == "train");
    // the text form names the interpreter and where it came from
    auto r = run({DTRAIN_BIN, "plan", "--python", "/bin/sh", script});
    CHECK(has(r.out, "python      /bin/sh (--python)"));
  }

  TEST_CASE("python3 as PATH finds it, and the plan says which") {
    TempDir t;
    std::string script = t.write("train.py", "");
    std::filesystem::create_directories(t.path / "bin");
    t.write("bin/python3", "#!/bin/sh\n");
    std::filesystem::permissions(t.path / "bin/python3", std::filesystem::perms::owner_all);
    auto env = base_env();
    env["PATH"] = (t.path / "bin").string() + ":/usr/bin:/bin";
    json j = plan_json({script}, env);
    CHECK(command_of(j)[0] == (t.path / "bin/python3").string());
    auto r = run({DTRAIN_BIN, "plan", script}, env);
    CHECK(has(r.out, (t.path / "bin/python3").string() + " (python3 from PATH)"));
    env["PATH"] = (t.path / "nothing").string();
    r = run({DTRAIN_BIN, "launch", script}, env);
    CHECK(r.status == 2);
    CHECK(has(r.err, "--python: python3 is not on PATH"));
    CHECK(has(r.err, "give the interpreter with --python PATH (or PYTHON_EXEC), or --no-python"));
  }

  TEST_CASE("-m MODULE, --no-python PROG and -- PROG") {
    json m = plan_json({"--python", "/bin/sh", "-m", "pkg.train", "--lr", "0.1"});
    CHECK(command_of(m) == std::vector<std::string>{"/bin/sh", "-u", "-m", "pkg.train", "--lr", "0.1"});
    CHECK(m["name"] == "pkg.train");
    json np = plan_json({"--no-python", "/bin/echo", "a", "-m"});
    CHECK(command_of(np) == std::vector<std::string>{"/bin/echo", "a", "-m"});
    CHECK(np["name"] == "echo");
    json dd = plan_json({"--nproc-per-node", "3", "--", "/bin/echo", "--x"});
    CHECK(command_of(dd) == std::vector<std::string>{"/bin/echo", "--x"});
    CHECK(dd["procs_per_instance"] == 3);
    auto both = run({DTRAIN_BIN, "plan", "-m", "--no-python", "x"});
    CHECK(both.status == 2);
    CHECK(has(both.err, "-m/--module runs a Python module and --no-python a program"));
    auto nothing = run({DTRAIN_BIN, "launch", "-m"});
    CHECK(nothing.status == 2);
    CHECK(has(nothing.err, "-m needs the program after the options"));
  }

  TEST_CASE("-- PROG never adds words to the built-in demo job: it runs the program") {
    auto r = run({DTRAIN_BIN, "launch", "--nproc-per-node", "1", "--", "/bin/echo", "not-the-demo"});
    CHECK(r.status == 0);
    CHECK(has(r.out, "[0/0] not-the-demo"));
    CHECK_FALSE(has(r.out, "shard"));  // the demo worker's line
    auto flag = run({DTRAIN_BIN, "launch", "--", "--epochs", "2"});
    CHECK(flag.status == 2);
    CHECK(has(flag.err, "after --, the program to run comes first (got '--epochs')"));
  }

  TEST_CASE("a job file first keeps its options after it, and -- ARGS are appended to its command") {
    TempDir t;
    std::string job = t.write("job.json", R"({"command": ["/bin/echo", "x"]})");
    json j = plan_json({job, "--nproc-per-node", "2", "--", "--lr", "0.1"});
    CHECK(command_of(j) == std::vector<std::string>{"/bin/echo", "x", "--lr", "0.1"});
    CHECK(j["procs_per_instance"] == 2);
  }

  TEST_CASE("--spec supplies the rest; the program replaces its command") {
    TempDir t;
    std::string job = t.write("job.json", R"({"name": "nightly", "command": ["/bin/false"], "env": {"K": "v"},
                                              "cluster": {"procs_per_instance": 3}, "batch": {"per_replica": 4}})");
    json j = plan_json({"--spec", job, "--", "/bin/echo", "hi"});
    CHECK(command_of(j) == std::vector<std::string>{"/bin/echo", "hi"});
    CHECK(j["name"] == "nightly");
    CHECK(j["env"]["K"] == "v");
    CHECK(j["batch"]["global"] == 12);
    auto two = run({DTRAIN_BIN, "plan", job, "--spec", job});
    CHECK(two.status == 2);
    CHECK(has(two.err, "two job files"));
  }

  TEST_CASE("the plan of a torchrun-style launch is the plan of the equivalent job file") {
    TempDir t;
    std::string script = t.write("train.py", "");
    json a = plan_json({"--python", "/bin/sh", "--nproc-per-node", "4", "--rdzv-id", "r1", script, "--epochs", "2"});
    std::string job = t.write("job.json", json{{"name", "train"},
                                               {"command", {"/bin/sh", "-u", script, "--epochs", "2"}},
                                               {"rendezvous", {{"run_id", "r1"}}},
                                               {"cluster", {{"procs_per_instance", 4}}}}
                                              .dump());
    json b = plan_json({job});
    a.erase("spec_file");
    b.erase("spec_file");
    a.erase("identity_sources");
    b.erase("identity_sources");
    a.erase("slots_source");  // "flags" vs "spec": where the count came from
    b.erase("slots_source");
    CHECK(a == b);
  }

  TEST_CASE("torchrun's underscore spellings") {
    TempDir t;
    std::string script = t.write("train.py", "");
    json j = plan_json({"--python", "/bin/sh", "--nproc_per_node=3", "--max_restarts", "2", "--rdzv_id=abc", script});
    CHECK(j["procs_per_instance"] == 3);
    CHECK(j["restart"]["max_restarts"] == 2);
    CHECK(j["run_id"] == "abc");
  }

  TEST_CASE("an unknown option: did you mean, exit 2, and the job file is not blamed") {
    TempDir t;
    std::string script = t.write("train.py", "");
    auto r = run({DTRAIN_BIN, "launch", "--nprocs", "4", script});
    CHECK(r.status == 2);
    CHECK(has(r.err, "dtrain launch: unknown option '--nprocs', did you mean '--nproc-per-node'?"));
    std::string job = t.write("job.json", R"({"command": ["/bin/true"]})");
    r = run({DTRAIN_BIN, "launch", job, "--nproc-per-nodes", "2"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "unknown option '--nproc-per-nodes', did you mean '--nproc-per-node'?"));
    CHECK_FALSE(has(r.err, "job.json"));
    CHECK_FALSE(has(r.err, "job file"));
    r = run({DTRAIN_BIN, "plan", "--nproc_per_nodes=2", script});
    CHECK(r.status == 2);
    CHECK(has(r.err, "did you mean '--nproc-per-node'?"));
    // a beginning of one of dtrain's own flags is not completed
    r = run({DTRAIN_BIN, "plan", "--summary", "s.json", script});
    CHECK(r.status == 2);
    CHECK(has(r.err, "unknown option '--summary', did you mean '--summary-json'?"));
  }

  TEST_CASE("an unambiguous beginning of a torchrun flag is that flag, with a note; an ambiguous one is refused") {
    TempDir t;
    std::string script = t.write("train.py", "");
    for (const char* word : {"--nproc_per_nod", "--nproc-per-nod", "--nproc"}) {
      Result r = plan({"--python", "/bin/sh", word, "2", script});
      INFO(word << ": " << r.err);
      CHECK(ok(r)["procs_per_instance"] == 2);
      CHECK(has(r.err, std::string("dtrain: note: ") + word + " taken as --nproc-per-node"));
    }
    json j = ok(plan({"--max_rest=3", "--rdzv-i", "job9", "--", "/bin/true"}));
    CHECK(j["restart"]["max_restarts"] == 3);
    CHECK(j["run_id"] == "job9");
    const std::pair<const char*, const char*> ambiguous[] = {
        {"--rdzv-", "'--rdzv-' is ambiguous: it begins --rdzv-backend, --rdzv-endpoint, --rdzv-id, --rdzv-conf"},
        {"--ma", "'--ma' is ambiguous: it begins --max-restarts, --master-addr, --master-port"},
        {"--no-", "'--no-' is ambiguous: it begins --no-python, --no-tag, --no-progress"},
    };
    for (const auto& [word, message] : ambiguous) {
      Result r = run({DTRAIN_BIN, "launch", word, "1", script});
      INFO(word << ": " << r.err);
      CHECK(r.status == 2);
      CHECK(has(r.err, message));
    }
  }

  TEST_CASE("--nproc_per_nod 2 launches 2 workers") {
    Result r = run({DTRAIN_BIN, "launch", "--no-progress", "--nproc_per_nod", "2", "--", "/bin/echo", "worker"},
                   base_env(), 60);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(has(r.out, "[0/0] worker"));
    CHECK(has(r.out, "[0/1] worker"));
    CHECK_FALSE(has(r.out, "[0/2]"));
    CHECK(has(r.err, "dtrain: note: --nproc_per_nod taken as --nproc-per-node"));
  }

  TEST_CASE("a script that is not there is refused before anything runs") {
    auto r = run({DTRAIN_BIN, "launch", "--nproc-per-node", "1", "/nonexistent/train.py"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "/nonexistent/train.py: no such file"));
    CHECK(has(r.err, "--no-python (or --) to run a program"));
  }
}
