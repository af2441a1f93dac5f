// Every torchrun flag (PyTorch 1.13 and 2.x) and its PET_ variable through the real binary: the
// table of dtrain(1) ("Every torchrun flag") is parsed and each row run in both spellings and as
// its variable; the flags of torch's own run.py must all be in that table.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan_run.hpp"

namespace {

struct Row {
  std::string flag, example, variable, what;
};

// The rows of the table in dtrain(1) after the "torchrun-flags" comment, up to .EE.
std::vector<Row> man_table() {
  std::string page = read_file(DTRAIN_SOURCE_DIR "/man/dtrain.1");
  auto at = page.find(".\\\" torchrun-flags:");
  REQUIRE_MESSAGE(at != std::string::npos, "man/dtrain.1 has no torchrun-flags table");
  auto end = page.find("\n.EE", at);
  std::istringstream in(page.substr(page.find('\n', at) + 1, end - page.find('\n', at) - 1));
  std::vector<Row> rows;
  static const std::regex gap(R"( {2,})");
  for (std::string line; std::getline(in, line);) {
    std::string plain;
    for (std::size_t i = 0; i < line.size(); ++i)  // "\-" -> "-"
      if (!(line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '-')) plain += line[i];
    std::vector<std::string> cols;
    for (std::sregex_token_iterator it(plain.begin(), plain.end(), gap, -1), e; it != e; ++it)
      if (!it->str().empty()) cols.push_back(*it);
    INFO("dtrain.1 row: " << plain);
    REQUIRE(cols.size() == 4);
    rows.push_back({cols[0], cols[1], cols[2], cols[3]});
  }
  return rows;
}

std::string underscored(std::string flag) {
  for (std::size_t i = 2; i < flag.size(); ++i)
    if (flag[i] == '-') flag[i] = '_';
  return flag;
}

// What each row needs around it: the program (a module, a script, a program) and, for a node
// range, where node 0 is.
struct Context {
  TempDir dir;
  std::string script = dir.write("train.py", "print('hi')\n");
  std::vector<std::string> program(const std::string& flag) const {
    if (flag == "-m" || flag == "--module") return {"pkg.train"};
    if (flag == "--run-path") return {script};
    if (flag == "--no-python") return {"/bin/true"};
    return {"--", "/bin/true"};
  }
  std::vector<std::string> around(const std::string& flag) const {
    std::vector<std::string> a{"--insecure"};
    if (flag == "--nnodes") a.insert(a.end(), {"--rdzv-endpoint", "h0"});
    return a;
  }
};

Result plan_row(const Context& c, const Row& r, const std::string& spelling, bool as_variable) {
  std::vector<std::string> args = c.around(r.flag);
  auto env = base_env();
  if (as_variable) {
    env[r.variable] = r.example == "-" ? "1" : r.example;
  } else {
    args.push_back(spelling);
    if (r.example != "-") args.push_back(r.example);
  }
  for (const auto& w : c.program(r.flag)) args.push_back(w);
  return plan(args, env);
}

// The flags of a torch run.py: every option string of its add_argument calls.
std::set<std::string> torch_flags(const std::string& text) {
  std::set<std::string> out;
  static const std::regex call(R"(add_argument\(([^)]*)\))");
  static const std::regex opt(R"re("(--?[a-z][a-z_-]*)")re");
  for (std::sregex_iterator it(text.begin(), text.end(), call), e; it != e; ++it) {
    std::string args = (*it)[1];
    for (std::sregex_iterator o(args.begin(), args.end(), opt), oe; o != oe; ++o) out.insert((*o)[1]);
  }
  return out;
}

}  // namespace

TEST_SUITE("cli::torchrun") {
  TEST_CASE("every row of dtrain(1)'s torchrun table runs: both spellings and the PET_ variable") {
    Context c;
    auto rows = man_table();
    CHECK(rows.size() >= 26);
    for (const auto& r : rows) {
      std::vector<std::string> spellings{r.flag};
      if (r.flag.rfind("--", 0) == 0 && r.flag.find('-', 2) != std::string::npos) spellings.push_back(underscored(r.flag));
      for (const auto& s : spellings) {
        Result res = plan_row(c, r, s, false);
        INFO(s << " " << r.example << ": " << res.err);
        CHECK(res.status == 0);
        CHECK(json::parse(res.out).is_object());
        if (r.what.rfind("note:", 0) == 0)  // accepted with one note of what dtrain does instead
          CHECK(has(res.err, "dtrain: note: " + r.flag + " "));
      }
      if (r.variable != "-") {
        CHECK(r.variable == "PET_" + [&] {  // torchrun's name: the long flag in capitals, _ for -
                std::string v;
                for (char ch : (r.flag == "-m" ? std::string("--module") : r.flag == "-r" ? std::string("--redirects")
                                : r.flag == "-t" ? std::string("--tee") : r.flag).substr(2))
                  v += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
                return v;
              }());
        Result res = plan_row(c, r, r.flag, true);
        INFO(r.variable << "=" << r.example << ": " << res.err);
        CHECK(res.status == 0);
      }
    }
  }

  TEST_CASE("every flag of torch's run.py (1.13 here, 2.x's list) is in the table") {
    std::set<std::string> table;
    for (const auto& r : man_table()) table.insert(r.flag);
    auto covered = [&](const std::string& f) {
      std::string dashed = f;
      for (std::size_t i = 2; i < dashed.size(); ++i)
        if (dashed[i] == '_') dashed[i] = '-';
      return table.count(f) || table.count(dashed);
    };
    // torch 2.x's torch/distributed/run.py (get_args_parser), both spellings of each
    for (const char* f : {"--nnodes", "--nproc-per-node", "--nproc_per_node", "--rdzv-backend", "--rdzv-endpoint",
                          "--rdzv-id", "--rdzv-conf", "--standalone", "--max-restarts", "--monitor-interval",
                          "--start-method", "--event-log-handler", "--role", "-m", "--module", "--no-python",
                          "--run-path", "--log-dir", "-r", "--redirects", "-t", "--tee", "--local-ranks-filter",
                          "--node-rank", "--master-addr", "--master-port", "--local-addr", "--logs-specs",
                          "--numa-binding", "--signals-to-handle", "--shutdown-timeout"})
      CHECK_MESSAGE(covered(f), f << " (torch 2.x) is missing from dtrain(1)'s torchrun table");
    const std::string run_py = "/usr/lib/python3/dist-packages/torch/distributed/run.py";
    std::string text = read_file(run_py);
    if (text.empty()) {
      MESSAGE("no " << run_py << " on this machine: torch 1.13's own list not read");
      return;
    }
    auto from = text.find("def get_args_parser");
    REQUIRE(from != std::string::npos);
    auto flags = torch_flags(text.substr(from, text.find("return parser", from) - from));
    CHECK(flags.size() >= 20);
    for (const auto& f : flags)
      CHECK_MESSAGE(covered(f), f << " (" << run_py << ") is missing from dtrain(1)'s torchrun table");
  }

  TEST_CASE("a flag's note is printed once; the last of a repeated flag wins, as in argparse") {
    Result r = plan({"--monitor-interval", "1", "--monitor_interval", "2", "--nproc-per-node", "2",
                     "--nproc_per_node", "3", "--", "/bin/true"});
    REQUIRE(r.status == 0);
    CHECK(ok(r)["procs_per_instance"] == 3);
    std::size_t n = 0;
    for (auto at = r.err.find("note: --monitor-interval"); at != std::string::npos; at = r.err.find("note: --monitor-interval", at + 1)) ++n;
    CHECK(n == 1);
    CHECK(has(r.err, "dtrain: note: --monitor-interval 2: not used; dtrain hears of a worker's exit at once"));
  }

  TEST_CASE("--shutdown-timeout is grace_s, as --grace; the two may not disagree") {
    CHECK(ok(plan({"--shutdown-timeout", "30", "--", "/bin/true"}))["grace_s"] == 30);
    CHECK(ok(plan({"--shutdown_timeout=7", "--grace", "7", "--", "/bin/true"}))["grace_s"] == 7);
    auto env = base_env();
    env["PET_SHUTDOWN_TIMEOUT"] = "12";
    CHECK(ok(plan({"--", "/bin/true"}, env))["grace_s"] == 12);
    Result r = plan({"--grace", "5", "--shutdown-timeout", "9", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--grace: --shutdown-timeout 9 says otherwise; give one of them"));
    r = plan({"--shutdown-timeout", "-1", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--shutdown-timeout: -1 is out of range; expected a number from 0 to 3600"));
  }

  TEST_CASE("flags map to the plan: --rdzv-conf, --log-dir, --local-addr, -r3/-t3") {
    json j = ok(plan({"--rdzv_conf", "join_timeout=60,last_call_timeout=7,read_timeout=5", "--log_dir", "logs",
                      "--local-addr", "10.1.2.3", "-r3", "-t3", "--", "/bin/true"}));
    CHECK(j["rendezvous"]["join_timeout_s"] == 60);
    CHECK(j["rendezvous"]["last_call_s"] == 7);
    CHECK(j["output"]["log_dir"] == "logs");
    CHECK(j["env"]["DTRAIN_SOCKET_ADDR"] == "10.1.2.3");
    Result r = plan({"--rdzv-conf", "colour=blue", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--rdzv-conf: unknown key 'colour'; the keys dtrain reads: join_timeout, timeout"));
    r = plan({"--start-method", "thread", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--start-method: 'thread' is not spawn, fork or forkserver"));
    r = plan({"-r", "7", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--redirects: '7' is not a stream choice; expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both)"));
    r = plan({"--local-ranks-filter", "5", "--nproc-per-node", "2", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--local-ranks-filter 5: '5' is not a local rank or a range A-B of local ranks 0..1"));
    r = plan({"--nproc-per-node", "xpu", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "xpu: dtrain runs CUDA GPU or CPU workers"));
  }
}

TEST_SUITE("cli::pet_env") {
  TEST_CASE("PET_NPROC_PER_NODE=3 is --nproc-per-node 3; the command line wins over it") {
    auto env = base_env();
    env["PET_NPROC_PER_NODE"] = "3";
    CHECK(ok(plan({"--", "/bin/true"}, env))["procs_per_instance"] == 3);
    CHECK(ok(plan({"--nproc_per_node", "2", "--", "/bin/true"}, env))["procs_per_instance"] == 2);
  }

  TEST_CASE("the job spec wins over PET_*, with a note; the fields it does not set take PET_*") {
    TempDir t;
    auto job = t.write("job.json", R"({"command": ["true"], "cluster": {"procs_per_instance": 2},
                                       "rendezvous": {"join_timeout_s": 100}})");
    auto env = base_env();
    env["PET_NPROC_PER_NODE"] = "3";
    env["PET_MAX_RESTARTS"] = "4";
    env["PET_RDZV_CONF"] = "join_timeout=60,last_call_timeout=9";
    Result r = plan({job}, env);
    json j = ok(r);
    CHECK(j["procs_per_instance"] == 2);
    CHECK(j["restart"]["max_restarts"] == 4);
    CHECK(j["rendezvous"]["join_timeout_s"] == 100);
    CHECK(j["rendezvous"]["last_call_s"] == 9);
    CHECK(has(r.err, "dtrain: note: PET_NPROC_PER_NODE=3 not used: the job spec sets cluster.procs_per_instance"));
    CHECK(has(r.err, "PET_RDZV_CONF key join_timeout (the job spec sets /rendezvous/join_timeout_s) not used"));
    // --set is the job spec too
    r = plan({job, "--set", "/restart/max_restarts=1"}, env);
    CHECK(ok(r)["restart"]["max_restarts"] == 1);
  }

  TEST_CASE("PET_* of a PyTorchJob node: node count, rank, master, and a switch") {
    auto env = base_env();
    env.insert({{"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}, {"PET_MASTER_ADDR", "10.0.0.1"}, {"PET_MASTER_PORT", "23456"}});
    json j = ok(plan({"--insecure", "--", "/bin/true"}, env));
    CHECK(j["instances"] == 2);
    CHECK(j["node_rank"] == 1);
    CHECK(j["master_addr"] == "10.0.0.1");
    CHECK(j["master_port"] == 23456);
    CHECK(j["rendezvous"]["endpoint"] == "10.0.0.1:29400");
    auto one = base_env();
    one["PET_STANDALONE"] = "1";
    one["SLURM_JOB_NODELIST"] = "n[1-4]";
    one["SLURM_NODEID"] = "2";
    CHECK(ok(plan({"--", "/bin/true"}, one))["instances"] == 1);
    one["PET_STANDALONE"] = "0";
    CHECK(ok(plan({"--insecure", "--", "/bin/true"}, one))["instances"] == 4);
  }

  TEST_CASE("a bad PET_ value is refused, and the refusal names the variable") {
    auto env = base_env();
    env["PET_NNODES"] = "two";
    Result r = plan({"--", "/bin/true"}, env);
    CHECK(r.status == 2);
    CHECK(has(r.err, "--nnodes: 'two' is not a node count"));
    CHECK(has(r.err, "(from PET_NNODES=two)"));
    env.erase("PET_NNODES");
    env["PET_STANDALONE"] = "yes";
    r = plan({"--", "/bin/true"}, env);
    CHECK(r.status == 2);
    CHECK(has(r.err, "PET_STANDALONE=yes: expected 0 or 1"));
  }

  TEST_CASE("PET_MODULE shapes a program only; without one it is not read") {
    auto env = base_env();
    env["PET_MODULE"] = "1";
    json j = ok(plan({"pkg.train"}, env));
    CHECK(j["command"][2] == "-m");
    CHECK(j["command"][3] == "pkg.train");
    TempDir t;
    auto job = t.write("job.json", R"({"command": ["true"]})");
    CHECK(plan({job}, env).status == 0);
  }
}
