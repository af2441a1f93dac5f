// `dtrain plan` takes every word `dtrain launch` takes and shows the plan launch runs; torchrun's
// defaults for a launch without a job file; the interpreter of a job file (--python, PYTHON_EXEC).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan_run.hpp"

namespace {

// An executable script in `t` (a stand-in interpreter) that prints its arguments.
std::string fake_python(const TempDir& t, const std::string& name) {
  std::string text = "#!/bin/sh\necho \"";
  text += name;
  text += " ran: $*\"\n";
  auto p = t.write(name, text);
  chmod(p.c_str(), 0755);
  return p;
}

}  // namespace

TEST_SUITE("cli::plan_launch") {
  TEST_CASE("plan accepts every launch command line") {
    TempDir t;
    auto script = t.write("train.py", "print('hi')\n");
    auto job = t.write("job.json", R"({"command": ["true"]})");
    const std::vector<std::vector<std::string>> lines = {
        {"--log-dir", "logs", "--tee", "3", script},
        {"-r", "3", "-t", "3", "--local-ranks-filter", "0", "--rdzv_conf", "timeout=60", "--monitor_interval", "1",
         "--start_method", "spawn", script},
        {"--nproc-per-node", "2", "--role", "trainer", "--grace", "3", "--no-tag", "--timestamps", "--ranks", "0",
         "--summary-json", "s.json", "--no-progress", script, "--lr", "0.1"},
        {"--standalone", "--nproc_per_node=2", "--tag", "--progress", script},
        {"--max-restarts", "2", "--rdzv-id", "job7", "--redirects", "0:3,1:1", "--", "/bin/true"},
        {job, "--log-dir", "logs", "--grace", "2", "--", "extra"},
        {"--spec", job, "--python", "/bin/sh", script},
        {"--logs-specs", "x", "--numa-binding", "node", "--signals-to-handle", "SIGUSR1", "--event-log-handler", "null",
         "--local-addr", "127.0.0.1", "--", "/bin/true"},
    };
    for (const auto& l : lines) {
      std::string shown;
      for (const auto& w : l) shown.append(" ").append(w);
      Result r = plan(l);
      INFO("dtrain plan" << shown << "\n" << r.err);
      CHECK(r.status == 0);
    }
  }

  TEST_CASE("plan shows the plan launch runs (DTRAIN_PLAN), the output flags included") {
    TempDir t;
    const std::vector<std::vector<std::string>> lines = {
        {"--rdzv-id", "same1", "--log-dir", (t.path / "logs").string(), "--tee", "3", "--grace", "3", "--no-tag",
         "--rdzv_conf", "timeout=60", "--nproc-per-node", "2"},
        {"--rdzv-id", "same2", "--timestamps", "--max-restarts", "1", "--local-addr", "127.0.0.1"},
    };
    for (const auto& opts : lines) {
      std::vector<std::string> tail = {"--no-python", "/bin/sh", "-c", "cat \"$DTRAIN_PLAN\" > plan-$RANK.json"};
      std::vector<std::string> p = opts, l = {DTRAIN_BIN, "launch", "--no-progress"};
      p.insert(p.end(), tail.begin(), tail.end());
      l.insert(l.end(), opts.begin(), opts.end());
      l.insert(l.end(), tail.begin(), tail.end());
      json planned = ok(plan(p));
      auto env = base_env();
      Result r = run({"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", t.path.string()}, env);  // a working shell
      REQUIRE(r.status == 0);
      std::vector<std::string> in_dir = {"/bin/sh", "-c", "cd \"$0\" && shift && exec \"$@\"", t.path.string(), "x"};
      in_dir.insert(in_dir.end(), l.begin(), l.end());
      r = run(in_dir, env);
      INFO(r.err);
      REQUIRE(r.status == 0);
      json launched = json::parse(read_file(t.path / "plan-0.json"));
      for (const char* key : {"world_size", "procs_per_instance", "command", "output", "rendezvous", "restart",
                              "grace_s", "env", "run_id", "slots_source"})
        CHECK_MESSAGE(planned[key] == launched[key], key << ": plan " << planned[key].dump() << ", launch "
                                                         << launched[key].dump());
    }
  }

  TEST_CASE("a launch without a job file runs torchrun's one worker per node; a job file keeps its default") {
    json j = ok(plan({"--", "/bin/true"}));
    CHECK(j["procs_per_instance"] == 1);
    CHECK(j["slots_source"] == "torchrun's default (--nproc-per-node for more)");
    auto gpus = base_env();
    gpus.erase("DTRAIN_TEST_GPUS");
    gpus.emplace("DTRAIN_TEST_GPUS", "4");
    j = ok(plan({"--no-python", "/bin/true"}, gpus));
    CHECK(j["procs_per_instance"] == 1);
    CHECK(j["use_gpus"] == true);
    CHECK(ok(plan({"--nproc-per-node", "auto", "--", "/bin/true"}, gpus))["procs_per_instance"] == 4);
    TempDir t;
    auto job = t.write("job.json", R"({"command": ["true"]})");
    CHECK(ok(plan({job}, gpus))["procs_per_instance"] == 4);
    // with --spec, the job file's default stands
    CHECK(ok(plan({"--spec", job, "--", "/bin/true"}, gpus))["procs_per_instance"] == 4);    // and the launch starts exactly one worker
    Result r = run({DTRAIN_BIN, "launch", "--no-progress", "--no-tag", "--", "/bin/sh", "-c", "echo worker $RANK of $WORLD_SIZE"});
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == "worker 0 of 1\n");
  }

  TEST_CASE("the workers get the learning rate the plan scaled (DTRAIN_LEARNING_RATE, DTRAIN_WARMUP_ITERATIONS)") {
    TempDir t;
    auto job = t.write("job.json", R"({"command": ["/bin/sh", "-c", "echo lr=$DTRAIN_LEARNING_RATE warmup=$DTRAIN_WARMUP_ITERATIONS"],
                                       "cluster": {"procs_per_instance": 2},
                                       "batch": {"per_replica": 64, "learning_rate": {"base": 0.1, "reference_global_batch": 256,
                                                                                      "scaling": "linear", "warmup_iterations": 5}}})");
    Result r = run({DTRAIN_BIN, "launch", "--no-progress", "--no-tag", job});
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == "lr=0.05 warmup=5\nlr=0.05 warmup=5\n");  // 0.1 x 128 / 256
    CHECK(ok(plan({job}))["batch"]["learning_rate"].get<double>() == doctest::Approx(0.05));
  }

  TEST_CASE("--python and PYTHON_EXEC run a job file's Python command") {
    TempDir t;
    auto flag_py = fake_python(t, "flagpy");
    auto env_py = fake_python(t, "envpy");
    auto job = t.write("job.json", R"({"command": ["python3", "train.py", "--lr", "0.1"],
                                       "cluster": {"procs_per_instance": 1}})");
    json j = ok(plan({job, "--python", flag_py}));
    CHECK(j["command"][0] == flag_py);
    auto env = base_env();
    env["PYTHON_EXEC"] = env_py;
    Result r = run({DTRAIN_BIN, "launch", "--no-progress", "--no-tag", job}, env);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(has(r.out, "envpy ran: train.py --lr 0.1"));
    r = run({DTRAIN_BIN, "launch", "--no-progress", "--no-tag", "--python", flag_py, job}, env);
    CHECK(r.status == 0);
    CHECK(has(r.out, "flagpy ran: train.py --lr 0.1"));
    r = run({DTRAIN_BIN, "plan", job, "--python", flag_py});
    CHECK(has(r.out, std::string("python      ").append(flag_py).append(" (--python)")));
    // a script launch takes PYTHON_EXEC too
    auto script = t.write("train.py", "");
    r = run({DTRAIN_BIN, "launch", "--no-progress", "--no-tag", script, "--epochs", "1"}, env);
    CHECK(r.status == 0);
    CHECK(has(r.out, std::string("envpy ran: -u ").append(script).append(" --epochs 1")));
    // --python with a command that is not Python is refused
    auto prog = t.write("prog.json", R"({"command": ["/bin/true"]})");
    r = run({DTRAIN_BIN, "plan", prog, "--python", flag_py});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--python: names the interpreter of a Python command, but the job's command starts with /bin/true"));
  }
}
