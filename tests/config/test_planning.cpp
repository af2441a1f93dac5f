// The seed's planning concepts in the plan (instance types, a partial last batch, the pipeline
// bubble, the learning rate), torchrun's --rdzv-conf keys, the interpreter of a job file, and NULs
// refused in any spec string.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/instance_types.hpp"
#include "dtrain/config/plan.hpp"
#include "dtrain/config/program.hpp"
#include "dtrain/config/spec.hpp"
#include "config_test.hpp"

using namespace dtrain::config;
using namespace dtrain::config::test;
using nlohmann::json;

TEST_SUITE("config::instance_types") {
  TEST_CASE("2 x ml.p3.8xlarge is cluster size 8 on a machine without a GPU") {
    Plan p = plan_of(R"({"command": ["python3", "t.py"], "cluster": {"instances": 2, "instance_type": "ml.p3.8xlarge"},
                         "rendezvous": {"endpoint": "algo-1:29400"}})");
    CHECK(p.world_size == 8);
    CHECK(p.procs_per_instance == 4);
    CHECK(p.use_gpus);
    CHECK(p.instance_type == "ml.p3.8xlarge");
    CHECK(has(p.slots_source, "instance_type ml.p3.8xlarge: 4 x V100"));
    CHECK(json::parse(plan_to_json(p))["instance_type"] == "ml.p3.8xlarge");
  }

  TEST_CASE("the table: EC2 and SageMaker names of the GPU families") {
    const std::pair<const char*, int> rows[] = {
        {"p3.2xlarge", 1},     {"ml.p3.16xlarge", 8}, {"p3dn.24xlarge", 8}, {"p4d.24xlarge", 8},
        {"ml.p4de.24xlarge", 8}, {"p5.48xlarge", 8},  {"g4dn.12xlarge", 4}, {"ml.g4dn.xlarge", 1},
        {"g5.48xlarge", 8},    {"ml.g5.12xlarge", 4}, {"g5.24xlarge", 4},   {"p2.16xlarge", 16}};
    for (const auto& [name, gpus] : rows) {
      CAPTURE(name);
      const InstanceType* t = find_instance_type(name);
      REQUIRE(t != nullptr);
      CHECK(t->gpus == gpus);
    }
    CHECK(find_instance_type("ml.m5.xlarge") == nullptr);  // a CPU type
    CHECK(find_instance_type("p3.8XLARGE") == nullptr);
  }

  TEST_CASE("an unknown type, or one given with more workers than it has, is refused with what to do") {
    std::string e = failure(R"({"command": ["a"], "cluster": {"instance_type": "ml.p3.8xlarg"}})");
    CHECK(has(e, "/cluster/instance_type: \"ml.p3.8xlarg\" is not a GPU instance type dtrain knows"));
    CHECK(has(e, "did you mean \"ml.p3.8xlarge\"?"));
    e = failure(R"({"command": ["a"], "cluster": {"instance_type": "p3.8xlarge", "gpus_per_instance": 8}})");
    CHECK(has(e, "/cluster/gpus_per_instance: 8 is more than the 4 GPUs of /cluster/instance_type \"p3.8xlarge\""));
    e = failure(R"({"command": ["a"], "cluster": {"instance_type": "p3.8xlarge", "procs_per_instance": 2}})");
    CHECK(has(e, "/cluster/procs_per_instance: 2 CPU workers conflicts with /cluster/instance_type \"p3.8xlarge\""));
    // fewer GPUs than the instance has: gpus_per_instance counts
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"instance_type": "p3.8xlarge", "gpus_per_instance": 2}})");
    CHECK(p.procs_per_instance == 2);
    CHECK(p.use_gpus);
  }

  TEST_CASE("SageMaker's current instance type gives the GPUs when the spec does not") {
    Plan p = plan_of(R"({"command": ["a"]})", {}, env_of({{"SM_CURRENT_INSTANCE_TYPE", "ml.g5.12xlarge"}}));
    CHECK(p.procs_per_instance == 4);
    CHECK(p.use_gpus);
    CHECK(has(p.slots_source, "SM_CURRENT_INSTANCE_TYPE=ml.g5.12xlarge"));
    auto rc = R"({"current_host": "algo-2", "hosts": ["algo-1", "algo-2"], "current_instance_type": "ml.p3.8xlarge"})";
    p = plan_of(R"({"command": ["a"]})", {}, env_of({{"SM_RESOURCE_CONFIG", rc}}));
    CHECK(p.world_size == 8);
    CHECK(p.identity.node_rank == 1);
    // SM_NUM_GPUS, when set, is SageMaker's own count; a CPU type falls back to this machine's count
    p = plan_of(R"({"command": ["a"]})", {}, env_of({{"SM_RESOURCE_CONFIG", rc}, {"SM_NUM_GPUS", "2"}}));
    CHECK(p.procs_per_instance == 2);
    p = plan_of(R"({"command": ["a"]})", {}, env_of({{"SM_CURRENT_INSTANCE_TYPE", "ml.m5.xlarge"}}));
    CHECK(p.procs_per_instance == 3);
    CHECK_FALSE(p.use_gpus);
  }
}

TEST_SUITE("config::batch_planning") {
  TEST_CASE("a partial last batch: 5001 samples at a global batch of 500") {
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 2}, "batch": {"global": 500, "dataset_size": 5001}})");
    REQUIRE(p.batch);
    CHECK(*p.batch->iterations_per_epoch == 11);
    REQUIRE(p.batch->last_batch);
    CHECK(*p.batch->last_batch == 1);
    CHECK(has(plan_to_text(p), "the last iteration of each epoch has 1 sample (10 full iterations before it)"));
    CHECK(json::parse(plan_to_json(p))["batch"]["last_batch"] == 1);
    p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 2}, "batch": {"global": 500, "dataset_size": 5000}})");
    CHECK(*p.batch->iterations_per_epoch == 10);
    CHECK_FALSE(p.batch->last_batch);
    CHECK(json::parse(plan_to_json(p))["batch"]["last_batch"].is_null());
  }

  TEST_CASE("the pipeline bubble (p-1)/(m+p-1), with a warning when large") {
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "parallel": {"pipeline": 4},
                         "batch": {"per_replica": 8, "micro_batches": 4}})");
    REQUIRE(p.pipeline_bubble);
    CHECK(*p.pipeline_bubble == doctest::Approx(3.0 / 7.0));
    REQUIRE(p.warnings.size() == 1);
    CHECK(has(p.warnings[0], "pipeline bubble (p-1)/(m+p-1) = 3/7 = 43%"));
    CHECK(has(p.warnings[0], "raise batch.micro_batches (at 16 it is 16%)"));
    CHECK(has(plan_to_text(p), "bubble      (p-1)/(m+p-1) = 3/7 = 42.9%"));
    CHECK(json::parse(plan_to_json(p))["parallel"]["bubble"].get<double>() == doctest::Approx(3.0 / 7.0));
    p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "parallel": {"pipeline": 4},
                    "batch": {"per_replica": 16, "micro_batches": 16}})");
    CHECK(*p.pipeline_bubble == doctest::Approx(3.0 / 19.0));
    CHECK(p.warnings.empty());
    p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}})");
    CHECK_FALSE(p.pipeline_bubble);
  }

  TEST_CASE("learning rate: linear, sqrt and none, in the plan JSON") {
    const char* spec = R"({"command": ["a"], "cluster": {"procs_per_instance": 2},
                           "batch": {"per_replica": 256, "learning_rate": {"base": 0.1, "reference_global_batch": 256,
                                                                           "scaling": "%s", "warmup_iterations": 7}}})";
    auto with = [&](const std::string& scaling) {
      std::string text = spec;
      text.replace(text.find("%s"), 2, scaling);
      return plan_of(text);
    };
    Plan p = with("linear");
    REQUIRE(p.batch->learning_rate);
    CHECK(*p.batch->learning_rate == doctest::Approx(0.2));
    CHECK(p.batch->warmup_iterations == 7);
    json j = json::parse(plan_to_json(p));
    CHECK(j["batch"]["learning_rate"].get<double>() == doctest::Approx(0.2));
    CHECK(j["batch"]["warmup_iterations"] == 7);
    CHECK(j["batch"]["learning_rate_spec"]["scaling"] == "linear");
    CHECK(*with("sqrt").batch->learning_rate == doctest::Approx(0.1 * std::sqrt(2.0)));
    CHECK(*with("none").batch->learning_rate == doctest::Approx(0.1));
    CHECK(has(plan_to_text(p), "rate 0.2 = base 0.1 x (512 / 256), warm-up 7 iterations"));
  }

  TEST_CASE("an elastic job's rate follows its global batch (replan)") {
    Overrides o;
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"instances": {"min": 1, "max": 4}, "procs_per_instance": 2},
                         "rendezvous": {"endpoint": "h:29400"},
                         "batch": {"per_replica": 32, "learning_rate": {"base": 0.4, "reference_global_batch": 256}}})");
    CHECK(*p.batch->learning_rate == doctest::Approx(0.4));  // 4 nodes x 2 x 32 = 256
    Plan two = replan(p, 2);
    CHECK(two.batch->global == 128);
    CHECK(*two.batch->learning_rate == doctest::Approx(0.2));
  }

  TEST_CASE("learning rate: what it needs, and a scaling it does not know") {
    CHECK(has(failure(R"({"command": ["a"], "batch": {"per_replica": 8, "learning_rate": {"reference_global_batch": 8}}})"),
              "/batch/learning_rate/base: missing"));
    CHECK(has(failure(R"({"command": ["a"], "batch": {"per_replica": 8, "learning_rate": {"base": 0.1}}})"),
              "/batch/learning_rate/reference_global_batch: missing; scaling \"linear\""));
    CHECK(failure(R"({"command": ["a"], "batch": {"per_replica": 8, "learning_rate": {"base": 0.1, "scaling": "none"}}})") ==
          "(no error)");
    CHECK(has(failure(R"({"command": ["a"], "batch": {"per_replica": 8, "learning_rate": {"base": 0.1, "scaling": "log",
                                                                                           "reference_global_batch": 8}}})"),
              "/batch/learning_rate/scaling: \"log\" is not a learning-rate scaling"));
    CHECK(has(failure(R"({"command": ["a"], "batch": {"per_replica": 8, "learning_rate": {"base": 0, "scaling": "none"}}})"),
              "/batch/learning_rate/base: 0 is out of range"));
  }
}

TEST_SUITE("config::spec_strings") {
  TEST_CASE("a NUL inside any spec string is refused, naming its JSON path") {
    auto refused = [](const std::string& text, const Overrides& o = {}) {
      try {
        (void)load_spec_text(text, o);
      } catch (const SpecError& e) {
        return std::string(e.what());
      }
      return std::string("(no error)");
    };
    CHECK(has(refused(R"({"command": ["python3", "tr\u0000ain.py"]})"), "/command/1: the string holds a NUL character"));
    CHECK(has(refused(R"({"command": ["a"], "env": {"A": "x\u0000y"}})"), "/env/A: the string holds a NUL"));
    CHECK(has(refused(R"({"command": ["a"], "env": {"A\u0000B": "x"}})"), "/env/A\\u0000B: the key holds a NUL"));
    CHECK(has(refused(R"({"command": ["a"], "name": "j\u0000"})"), "/name: the string holds a NUL"));
    Overrides o;
    o.sets = {R"(/workdir="a\u0000b")"};
    CHECK(has(refused(R"({"command": ["a"]})", o), "/workdir: the string holds a NUL character"));
  }
}

TEST_SUITE("config::rdzv_conf") {
  TEST_CASE("torchrun's keys land in the rendezvous fields") {
    Overrides o;
    CHECK(set_flag(o, "--rdzv-conf", "timeout=60, last_call_timeout=10,heartbeat_timeout=40,keep_alive_interval=4").empty());
    JobSpec s = load_spec_text(R"({"command": ["a"]})", o);
    CHECK(s.rendezvous.join_timeout_s == 60);
    CHECK(s.rendezvous.last_call_s == 10);
    CHECK(*s.rendezvous.heartbeat_timeout_s == 40);
    CHECK(s.rendezvous.heartbeat_s == 4);
    Overrides j = flags({{"--rdzv-conf", "join_timeout=90"}});
    CHECK(load_spec_text(R"({"command": ["a"], "rendezvous": {"join_timeout_s": 5}})", j).rendezvous.join_timeout_s == 90);
  }

  TEST_CASE("keys with no field are notes; unknown keys and bad values are refused") {
    Overrides o;
    auto notes = set_flag(o, "--rdzv-conf", "read_timeout=30,close_timeout=5");
    REQUIRE(notes.size() == 2);
    CHECK(has(notes[0], "--rdzv-conf read_timeout=30: not used;"));
    try {
      (void)set_flag(o, "--rdzv-conf", "colour=blue,timeout,timeout=soon,heartbeat_timeout=0");
      FAIL("accepted colour=blue");
    } catch (const SpecError& e) {
      REQUIRE(e.problems().size() == 3);
      CHECK(has(e.problems()[0].message, "unknown key 'colour'; the keys dtrain reads: join_timeout, timeout"));
      CHECK(has(e.problems()[1].message, "'timeout' is not KEY=VALUE"));
      CHECK(e.problems()[2].path == "--rdzv-conf timeout");
      CHECK(e.problems()[2].message == "'soon' is not a number; expected a number > 0 (at most 31536000)");
    }
    // a value of the right type is checked by the field's rule with the spec
    Overrides v = flags({{"--rdzv-conf", "heartbeat_timeout=0"}});
    try {
      (void)load_spec_text(R"({"command": ["a"]})", v);
      FAIL("accepted heartbeat_timeout=0");
    } catch (const SpecError& e) {
      CHECK(has(e.what(), "--rdzv-conf heartbeat_timeout: 0 is out of range; expected a number > 0"));
    }
  }
}

TEST_SUITE("config::python_of_a_job") {
  TEST_CASE("which words name a Python") {
    for (const char* yes : {"python", "python3", "python3.11", "/usr/bin/python3", "./venv/bin/python"}) CHECK(is_python_command(yes));
    for (const char* no : {"pythonista", "python3.", "python3.x", "./train.sh", "ipython", "sh"}) CHECK_FALSE(is_python_command(no));
  }

  TEST_CASE("--python and PYTHON_EXEC run a job file's Python command; the flag wins") {
    Environment env = env_of({{"PATH", "/usr/bin:/bin"}});
    JobSpec s = load_spec_text(R"({"command": ["python3", "train.py"]})", {});
    auto pc = retarget_python(s, std::string("/bin/sh"), env);  // any executable stands for the interpreter
    REQUIRE(pc);
    CHECK(s.command == std::vector<std::string>{"/bin/sh", "train.py"});
    CHECK(pc->python_source == "--python");
    env.vars["PYTHON_EXEC"] = "/bin/true";
    s = load_spec_text(R"({"command": ["python3", "train.py"]})", {});
    pc = retarget_python(s, std::nullopt, env);
    CHECK(s.command.front() == "/bin/true");
    CHECK(pc->python_source == "PYTHON_EXEC");
    s = load_spec_text(R"({"command": ["python3", "train.py"]})", {});
    (void)retarget_python(s, std::string("/bin/sh"), env);
    CHECK(s.command.front() == "/bin/sh");
    s = load_spec_text(R"({"command": ["./run.sh"]})", {});
    CHECK_FALSE(retarget_python(s, std::nullopt, env));  // PYTHON_EXEC leaves a program alone
    CHECK(s.command.front() == "./run.sh");
    CHECK_THROWS_WITH_AS(retarget_python(s, std::string("/bin/sh"), env),
                         doctest::Contains("--python: names the interpreter of a Python command, but the job's command "
                                           "starts with ./run.sh"),
                         SpecError);
    env.vars["PYTHON_EXEC"] = "/nonexistent/python9";
    s = load_spec_text(R"({"command": ["python3", "train.py"]})", {});
    CHECK_THROWS_WITH_AS(retarget_python(s, std::nullopt, env),
                         doctest::Contains("PYTHON_EXEC: PYTHON_EXEC=/nonexistent/python9 is not an executable file"),
                         SpecError);
  }
}
