// mpirun's words through the real binary (config/src/counts.cpp, cli/command_line.cpp): -n/-np,
// -ppn/--npernode and -H, one-dash words of several letters included, in plan and launch, and
// their refusals.
#include <doctest/doctest.h>

#include <unistd.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan_run.hpp"

namespace {

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// The lines of `text` that contain `what`.
std::size_t lines_with(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("cli::mpirun") {
  TEST_CASE("-n 4 -ppn 2 plans 2 nodes x 2, in every spelling") {
    for (std::vector<std::string> words : {std::vector<std::string>{"-n", "4", "-ppn", "2"},
                                           {"-np", "4", "--npernode", "2"},
                                           {"-n4", "--nproc-per-node", "2"},
                                           {"-np", "4", "--nnodes", "2"}}) {
      CAPTURE(words[0]);
      words.insert(words.end(), {"--insecure", "--rdzv-endpoint", "h0", "--", "/bin/true"});
      json j = ok(plan(words));
      CHECK(j["instances"] == 2);
      CHECK(j["procs_per_instance"] == 2);
      CHECK(j["world_size"] == 4);
    }
  }

  TEST_CASE("contradictions are refused with both sides named (exit 2)") {
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"-n", "5", "-ppn", "2"}, "-n: 5 does not divide by the 2 workers per node"},
        {{"-n", "4", "-ppn", "2", "--nnodes", "3"}, "-n: 4 disagrees with --nnodes 3 x --nproc-per-node 2 = 6 workers"},
        {{"-ppn", "2", "--nproc-per-node", "4"}, "says otherwise; give one of them"},
        {{"-n", "4", "--nnodes", "1:2"}, "-n: 4 fixes the world size, but --nnodes makes the job elastic"},
        {{"-n", "0"}, "-n: 0 is out of range; expected an integer from 1 to 1048576"},
        {{"-H", "a:4,b:2"}, "have different slot counts"},
        {{"-H", "a,a"}, "-H: host 'a' is named twice"},
        {{"-H", "a:2,b:2", "--nnodes", "3"}, "--nnodes 3 (flags) disagrees with -H a:2,b:2 (2 nodes)"},
    };
    for (const auto& [words, message] : cases) {
      std::vector<std::string> args = words;
      args.insert(args.end(), {"--insecure", "--rdzv-endpoint", "h0", "--", "/bin/true"});
      Result r = plan(args);
      INFO(words[0] << " " << words[1] << ": " << r.err);
      CHECK(r.status == 2);
      CHECK(has(r.err, message));
    }
  }

  TEST_CASE("-H: the hosts are the nodes in order, node 0 the rendezvous; plan shows them") {
    json j = ok(plan({"-H", "gpu1:2,gpu2:2,gpu3:2", "--insecure", "--", "/bin/true"}));
    CHECK(j["instances"] == 3);
    CHECK(j["procs_per_instance"] == 2);
    CHECK(j["rendezvous"]["endpoint"] == "gpu1:29400");
    CHECK(j["master_addr"] == "gpu1");
    CHECK(j["host_list"]["from"] == "-H gpu1:2,gpu2:2,gpu3:2");
    CHECK(j["host_list"]["this_host"].is_null());
    CHECK(j["host_list"]["hosts"][2] == json{{"host", "gpu3"}, {"node_rank", 2}, {"slots", 2}});
    Result r = run({DTRAIN_BIN, "plan", "--hosts", "gpu1:2,gpu2:2", "--insecure", "--", "/bin/true"});
    CHECK(r.status == 0);
    CHECK(has(r.out, "hosts       gpu1 gpu2 (2 nodes, node ranks in this order, 2 workers each; from -H gpu1:2,gpu2:2)"));
    CHECK(has(r.out, "not one of the hosts"));
  }

  TEST_CASE("-H: plan says where the token comes from, as the launch takes it (the head makes one when none is given)") {
    Result r = run({DTRAIN_BIN, "plan", "-H", "a,b", "--", "/bin/true"});
    CHECK(r.status == 0);
    CHECK_MESSAGE(has(r.out, ", a token this launch makes, sent to each host on its launch agent's standard input"), r.out);
    CHECK_MESSAGE(!has(r.out, "no token"), r.out);
    CHECK(ok(plan({"-H", "a,b", "--", "/bin/true"}))["rendezvous"]["token"] == "launch");
    auto env = base_env();
    env["DTRAIN_RDZV_TOKEN"] = std::string(32, 'k');
    r = run({DTRAIN_BIN, "plan", "-H", "a,b", "--", "/bin/true"}, env);
    CHECK_MESSAGE(has(r.out, ", token from DTRAIN_RDZV_TOKEN"), r.out);
    CHECK(ok(plan({"-H", "a,b", "--", "/bin/true"}, env))["rendezvous"]["token"] == "DTRAIN_RDZV_TOKEN");
    TempDir t;
    std::string file = t.write("token", std::string(32, 't') + "\n");
    r = run({DTRAIN_BIN, "plan", "-H", "a,b", "--token-file", file, "--", "/bin/true"});
    CHECK_MESSAGE(has(r.out, ", token from " + file), r.out);
    // one node of the job (--node-rank): no head to make a token, refused as its launch would be
    r = run({DTRAIN_BIN, "plan", "-H", "a,b", "--node-rank", "1", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "has no token"));
    CHECK(ok(plan({"-H", "a,b", "--node-rank", "1", "--insecure", "--", "/bin/true"}))["rendezvous"]["token"].is_null());
    // one node: its own store's token, whatever the environment holds
    CHECK(ok(plan({"-n", "2", "--", "/bin/true"}, env))["rendezvous"]["token"] == "store");
  }

  TEST_CASE("--hostfile, --launch-agent and --cpu-bind: in the plan, text and JSON; bad words refused") {
    TempDir t;
    std::string file = t.write("hosts", "# lab\nbox1 slots=2\n\nbox2:2   # the second\nbox3\n");
    json j = ok(plan({"--hostfile", file, "--launch-agent", "ssh -F 'my ssh config'", "--cpu-bind", "core", "--insecure",
                      "--", "/bin/true"}));
    CHECK(j["instances"] == 3);
    CHECK(j["procs_per_instance"] == 2);  // box3 takes the job's count: the others'
    CHECK(j["host_list"]["from"] == "--hostfile " + file);
    CHECK(j["host_list"]["launch_agent"] == json{"ssh", "-F", "my ssh config"});
    CHECK(j["host_list"]["hosts"][1]["host"] == "box2");
    CHECK(j["cpu_bind"] == "core");
    for (const auto& w : j["warnings"]) CHECK(w.get<std::string>().find("bind") == std::string::npos);
    Result r = run({DTRAIN_BIN, "plan", "-hostfile", file, "--insecure", "--", "/bin/true"});
    CHECK(r.status == 0);
    CHECK(has(r.out, "hosts       box1 box2 box3 (3 nodes, node ranks in this order, 2 workers each; from --hostfile"));
    CHECK(has(r.out, "launch agent ssh (what reaches each host)"));
    CHECK(has(r.out, "CPU binding none"));
    const std::pair<std::vector<std::string>, std::string> refused[] = {
        {{"--hostfile", t.write("bad", "box1 slots=2\nbox2 cores=2\n")}, ":2: 'box2 cores=2': 'cores=2' is not slots=N"},
        {{"--hostfile", t.write("twice", "box1\nbox1\n")}, ":2: host 'box1' is named twice"},
        {{"--hostfile", file, "-H", "a,b"}, "--hostfile: -H a,b names the hosts already"},
        {{"-H", "a,b", "--launch-agent", "ssh -o 'x"}, "--launch-agent: 'ssh -o 'x': no closing '"},
        {{"--launch-agent", "ssh"}, "--launch-agent: names the command that reaches the hosts"},
        {{"--cpu-bind", "socket"}, "--cpu-bind: \"socket\" is not a CPU binding"},
        {{"--cpu-bind", "core", "--bind-to", "numa"}, "says otherwise; give one of them"},
    };
    for (const auto& [words, message] : refused) {
      std::vector<std::string> args = words;
      args.insert(args.end(), {"--insecure", "--", "/bin/true"});
      r = plan(args);
      INFO(words[0] << " " << words[1] << ": " << r.err);
      CHECK(r.status == 2);
      CHECK(has(r.err, message));
    }
  }

  TEST_CASE("launch -n 2 and -H with this host run the workers; other hosts go through the launch agent") {
    Result r = run({DTRAIN_BIN, "launch", "--no-progress", "-np", "2", "--", "/bin/echo", "hello"}, base_env(), 60);
    CHECK(r.status == 0);
    CHECK(lines_with(r.out, "hello") == 2);
    r = run({DTRAIN_BIN, "launch", "--no-progress", "-H", this_host() + ":3", "--", "/bin/echo", "hello"}, base_env(), 60);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(lines_with(r.out, "hello") == 3);
    // from outside the hosts this launch is their head: a launch agent that is not there is 127, named
    r = run({DTRAIN_BIN, "launch", "--no-progress", "-H", "nosuchhost-a,nosuchhost-b", "--launch-agent",
             "/nonexistent/agent -x", "--", "/bin/true"},
            base_env(), 60);
    CHECK(r.status == 127);
    CHECK(has(r.err, "host nosuchhost-a (node 0): cannot start /nonexistent/agent"));
    CHECK(has(r.err, "host nosuchhost-b (node 1): cannot start /nonexistent/agent"));
  }
}
