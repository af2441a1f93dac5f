#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "dtrain/common/worker_env.hpp"
#include "dtrain/config/errors.hpp"
#include "config_test.hpp"
#include "dtrain/config/spec.hpp"

using namespace dtrain::config;
using dtrain::config::test::flags;
using dtrain::config::test::spec_of;

namespace {

std::vector<SpecProblem> problems_of(const std::string& text, const Overrides& o = {}) {
  try {
    (void)load_spec_text(text, o, "job.json");
  } catch (const SpecError& e) {
    return e.problems();
  }
  return {};
}

bool has_problem(const std::vector<SpecProblem>& ps, const std::string& path, const std::string& fragment) {
  for (const auto& p : ps)
    if (p.path == path && p.message.find(fragment) != std::string::npos) return true;
  return false;
}

std::string dump(const std::vector<SpecProblem>& ps) {
  std::string s;
  for (const auto& p : ps) s += p.path + ": " + p.message + "\n";
  return s;
}

}  // namespace

TEST_SUITE("config::spec") {
  TEST_CASE("the DESIGN example parses into every typed field") {
    JobSpec s = load_spec_text(R"({
      "version": 1, "name": "bert-dp", "command": ["python3", "train.py", "--lr", "0.1"], "workdir": ".",
      "cluster": { "instances": 2, "gpus_per_instance": 8 },
      "batch": { "per_replica": 32, "micro_batches": 4, "dataset_size": 5000, "epochs": 10 },
      "rendezvous": { "endpoint": "10.0.0.1:29400", "join_timeout_s": 600, "heartbeat_s": 5 },
      "restart": { "max_restarts": 3 }, "env": { "OMP_NUM_THREADS": "4" },
      "output": { "tag": true, "log_dir": "logs", "timestamps": false } })",
                               {});
    CHECK(s.name == "bert-dp");
    CHECK(s.command.size() == 4);
    CHECK(s.cluster.instances == 2);
    CHECK(s.cluster.gpus_per_instance == 8);
    CHECK_FALSE(s.cluster.gpus_auto);
    CHECK(s.has_batch);
    CHECK(s.batch.per_replica == 32);
    CHECK(s.batch.micro_batches == 4);
    CHECK(s.batch.dataset_size == 5000);
    CHECK(s.batch.epochs == 10);
    CHECK(s.rendezvous.endpoint == "10.0.0.1:29400");
    CHECK(s.restart.max_restarts == 3);
    CHECK(s.env.at("OMP_NUM_THREADS") == "4");
    CHECK(s.output.log_dir == "logs");
  }

  TEST_CASE("only command is required; defaults apply") {
    JobSpec s = load_spec_text(R"({"command": ["/usr/bin/python3", "x.py"]})", {});
    CHECK(s.name == "python3");
    CHECK(s.version == 1);
    CHECK(s.workdir == ".");
    CHECK_FALSE(s.cluster.instances.has_value());
    CHECK(s.cluster.gpus_auto);
    CHECK_FALSE(s.has_batch);
    CHECK(s.rendezvous.join_timeout_s == 600);
    CHECK(s.rendezvous.heartbeat_s == 5);
    CHECK(s.grace_s == 10);
    CHECK(s.output.tag);
    CHECK(s.output.tag_format == "[{node}/{rank}] ");
    CHECK(has_problem(problems_of("{}"), "/command", "missing"));
  }

  TEST_CASE("all problems of a spec are reported at once") {
    auto ps = problems_of(R"({"command": [], "cluster": {"instances": 0}, "batch": {"globl": 5}, "grace_s": "x"})");
    INFO(dump(ps));
    CHECK(ps.size() >= 4);
    CHECK(has_problem(ps, "/command", "empty"));
    CHECK(has_problem(ps, "/cluster/instances", "0 is out of range"));
    CHECK(has_problem(ps, "/batch/globl", "did you mean \"global\""));
    CHECK(has_problem(ps, "/grace_s", "is a string; expected a number"));
  }

  TEST_CASE("env may not set a reserved contract variable; the defaults it may") {
    for (const auto& v : dtrain::worker_env::variables()) {
      std::string name(v.name);
      CAPTURE(name);
      auto ps = problems_of(R"({"command": ["a"], "env": {")" + name + R"(": "1"}})");
      CHECK(has_problem(ps, "/env/" + name, "is set by dtrain for every worker") == v.reserved);
    }
  }

  TEST_CASE("duplicate keys are seen at every depth, with their JSON path") {
    auto ps = problems_of(R"({"command": ["a"], "cluster": {"instances": 1, "instances": 2},
                             "env": {"A": "1", "B": "2", "A": "3"}})");
    INFO(dump(ps));
    CHECK(has_problem(ps, "/cluster/instances", "duplicate key"));
    CHECK(has_problem(ps, "/env/A", "duplicate key"));
    CHECK(ps.size() == 2);
    // Inside arrays, the path counts elements.
    ps = problems_of(R"({"command": ["a"], "x": [1, {"k": 1, "k": 2}]})");
    INFO(dump(ps));
    CHECK(has_problem(ps, "/x/1/k", "duplicate key"));
  }

  TEST_CASE("hostile documents: deep nesting, many keys, huge numbers get a clear problem, fast") {
    SUBCASE("100,000 levels deep is refused before parsing (it crashed the error printer)") {
      std::string deep = "{\"command\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
      auto ps = problems_of(deep);
      REQUIRE(ps.size() == 1);
      CHECK(ps[0].message == "invalid JSON at line 1: arrays and objects nest deeper than 64 levels; a job spec needs only a "
                             "few (see dtrain-job(5))");
      // brackets inside strings do not count; 64 levels are fine as JSON
      CHECK(problems_of(R"({"command": ["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]})").empty());
      std::string ok = "{\"command\": [\"a\"], \"env\": {\"X\": " + std::string(62, '[') + std::string(62, ']') + "}}";
      CHECK(has_problem(problems_of(ok), "/env/X", "is not a string"));
    }
    SUBCASE("a value of --set nested too deep stays a string") {
      Overrides o;
      o.sets = {"/name=" + std::string(100000, '[')};
      CHECK(has_problem(problems_of(R"({"command": ["a"]})", o), "/name", "is not a valid job name"));
    }
    SUBCASE("40,000 keys: linear duplicate check, 50 problems shown") {
      // Time grows with the key count, not its square (5,000 -> 40,000 keys: about 8x, not 64x);
      // the best of five runs each and a bound halfway to quadratic, so a busy machine does not decide.
      auto seconds_for = [](int keys) {
        std::string many = R"({"command": ["a"], "env": {)";
        for (int i = 0; i < keys; ++i) many += (i ? "," : "") + std::string("\"K") + std::to_string(i) + "\": \"1\"";
        many += "}}";
        double best = 1e9;
        for (int run = 0; run < 5; ++run) {
          auto t0 = std::chrono::steady_clock::now();
          JobSpec s = load_spec_text(many, {});
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          CHECK(s.env.size() == std::size_t(keys));
        }
        return best;
      };
      double small = seconds_for(5000), big = seconds_for(40000);
      CHECK_MESSAGE(big < 32 * small + 0.05, "5,000 keys: " << small << " s, 40,000 keys: " << big << " s");
      std::string dup = R"({"command": ["a"], "env": {"A": "1")";
      for (int i = 0; i < 40000; ++i) dup += R"(, "A": "1")";
      dup += "}}";
      try {
        (void)load_spec_text(dup, {}, "job.json");
        FAIL("duplicates accepted");
      } catch (const SpecError& e) {
        CHECK(e.problems().size() == 40000);
        std::string what = e.what();
        CHECK(what.find("job.json: 40000 problems:") == 0);
        CHECK(what.find("\n  ... and 39950 more") != std::string::npos);
        CHECK(std::count(what.begin(), what.end(), '\n') == 51);
      }
    }
    SUBCASE("numbers past a double: a JSON problem, not library text") {
      auto ps = problems_of(R"({"command": ["a"], "grace_s": 1e400})");
      REQUIRE(ps.size() == 1);
      CHECK(ps[0].message == "invalid JSON: number overflow parsing '1e400' (numbers must fit a 64-bit float)");
    }
  }

  TEST_CASE("--set edits the document before validation") {
    Overrides o;
    o.sets = {"/batch/per_replica=16", "/cluster/gpus_per_instance=auto", "/name=\"123\"", "/env/FOO=bar baz"};
    JobSpec s = load_spec_text(R"({"command": ["a"], "cluster": {"gpus_per_instance": 2}})", o);
    CHECK(s.has_batch);
    CHECK(s.batch.per_replica == 16);
    CHECK(s.cluster.gpus_auto);
    CHECK_FALSE(s.cluster.gpus_per_instance.has_value());
    CHECK(s.name == "123");
    CHECK(s.env.at("FOO") == "bar baz");
    Overrides bad;
    bad.sets = {"batch.global=3", "/cluster/instances=0", "/command/x=1"};
    auto ps = problems_of(R"({"command": ["a"]})", bad);
    INFO(dump(ps));
    CHECK(has_problem(ps, "--set", "is not /json/pointer=value"));
    CHECK(has_problem(ps, "/cluster/instances", "(from --set /cluster/instances)"));
    CHECK(has_problem(ps, "--set", "cannot set /command/x"));
  }

  TEST_CASE("a flag's value is checked by its field's rule, named by the flag, and wins over the spec") {
    Overrides o = flags({{"--rdzv-endpoint", "node0:1234"}, {"--token-file", "/etc/tok"}, {"--max-restarts", "3"}});
    JobSpec s = load_spec_text(R"({"command": ["a"], "rendezvous": {"endpoint": "h:1", "token_file": "t"},
                                   "restart": {"max_restarts": 1}})", o);
    CHECK(s.rendezvous.endpoint == "node0:1234");
    CHECK(s.rendezvous.token_file == "/etc/tok");
    CHECK(s.restart.max_restarts == 3);
    Overrides bad = flags({{"--rdzv-endpoint", "nohost:port"}, {"--max-restarts", "-1"}, {"--token-file", ""},
                           {"--rdzv-id", "a/b"}});
    auto ps = problems_of(R"({"command": ["a"]})", bad);
    INFO(dump(ps));
    CHECK(has_problem(ps, "--rdzv-endpoint", "is not a number"));
    CHECK(has_problem(ps, "--max-restarts", "-1 is out of range; expected an integer from 0 to 10000"));
    CHECK(has_problem(ps, "--token-file", "\"\" is empty; expected a non-empty string"));
    CHECK(has_problem(ps, "--rdzv-id", "\"a/b\" is not a valid run id"));
    // a launch setting's value is checked by its own rule when the flag is read
    CHECK_THROWS_WITH_AS(flags({{"--master-port", "70000"}}),
                         "--master-port: 70000 is out of range; expected an integer from 1 to 65535", SpecError);
    CHECK_THROWS_WITH_AS(flags({{"--nproc-per-node", "0"}}), doctest::Contains("--nproc-per-node: 0 is out of range"),
                         SpecError);
    CHECK_THROWS_WITH_AS(flags({{"--max-restarts", "many"}}),
                         "--max-restarts: 'many' is not a number; expected an integer from 0 to 10000", SpecError);
  }

  TEST_CASE("the etcd backend needs an endpoint; its TLS and user fields come in pairs and only with it") {
    JobSpec s = load_spec_text(R"({"command": ["a"], "rendezvous": {"backend": "etcd", "endpoint": "e:2379",
        "etcd": {"cacert": "ca.pem", "cert": "c.pem", "key": "k.pem", "user": "u", "password_file": "p"}}})", {});
    CHECK(s.rendezvous.backend == "etcd");
    CHECK(s.rendezvous.etcd.tls());
    CHECK(s.rendezvous.etcd.password_file == "p");
    auto ps = problems_of(R"({"command": ["a"], "rendezvous": {"backend": "etcd", "etcd": {"cert": "c", "user": "u"}}})");
    INFO(dump(ps));
    CHECK(has_problem(ps, "/rendezvous/endpoint", "unset, but rendezvous.backend is \"etcd\""));
    CHECK(has_problem(ps, "/rendezvous/etcd/key", "needs both cert and key"));
    CHECK(has_problem(ps, "/rendezvous/etcd/password_file", "needs both user and password_file"));
    ps = problems_of(R"({"command": ["a"], "rendezvous": {"etcd": {"cacert": "ca"}}})");
    CHECK(has_problem(ps, "/rendezvous/etcd", "rendezvous.backend is \"builtin\""));
    ps = problems_of(R"({"command": ["a"], "rendezvous": {"backend": "consul"}})");
    CHECK(has_problem(ps, "/rendezvous/backend", "is not a rendezvous backend"));
    Overrides o = flags({{"--rdzv-backend", "etcd-v2"}, {"--rdzv-endpoint", "e:2379"}});
    CHECK(load_spec_text(R"({"command": ["a"]})", o).rendezvous.backend == "etcd");
    o = flags({{"--rdzv-backend", "c10d"}});
    CHECK(load_spec_text(R"({"command": ["a"]})", o).rendezvous.backend == "builtin");
    ps = problems_of(R"({"command": ["a"]})", flags({{"--rdzv-backend", "zookeeper"}}));
    CHECK(has_problem(ps, "--rdzv-backend", "\"zookeeper\" is not a rendezvous backend"));
  }

  TEST_CASE("the what() text lists one problem per line under the source") {
    try {
      (void)load_spec_text(R"({"command": 1, "grace_s": -1})", {}, "my.json");
      FAIL("expected a SpecError");
    } catch (const SpecError& e) {
      std::string w = e.what();
      CHECK(w.rfind("my.json: 2 problems:", 0) == 0);
      CHECK(w.find("\n  /command: 1 is an integer") != std::string::npos);
      CHECK(w.find("\n  /grace_s: -1 is out of range") != std::string::npos);
    }
  }

  TEST_CASE("the embedded default job is valid and takes overrides") {
    const std::filesystem::path dtrain = DTRAIN_BIN;  // its worker is built next to it
    JobSpec s = default_spec({}, dtrain);
    CHECK(s.name == "demo");
    CHECK(s.command.front() == (dtrain.parent_path() / "dtrain-demo-worker").string());
    CHECK(s.cluster.procs_per_instance == 2);
    CHECK(s.has_batch);
    Overrides o;
    o.sets = {"/cluster/procs_per_instance=3"};
    CHECK(default_spec(o, dtrain).cluster.procs_per_instance == 3);
    CHECK_THROWS_WITH_AS(default_spec({}, "/nonexistent/bin/dtrain"),
                         doctest::Contains("/nonexistent/libexec/dtrain/dtrain-demo-worker"), dtrain::ConfigError);
  }
}
