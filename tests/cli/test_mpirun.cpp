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

  TEST_CASE("launch -n 2 and -H with this host run the workers; from outside the hosts it is refused") {
    Result r = run({DTRAIN_BIN, "launch", "--no-progress", "-np", "2", "--", "/bin/echo", "hello"}, base_env(), 60);
    CHECK(r.status == 0);
    CHECK(lines_with(r.out, "hello") == 2);
    r = run({DTRAIN_BIN, "launch", "--no-progress", "-H", this_host() + ":3", "--", "/bin/echo", "hello"}, base_env(), 60);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(lines_with(r.out, "hello") == 3);
    r = run({DTRAIN_BIN, "launch", "--no-progress", "--insecure", "-H", "nosuchhost-a,nosuchhost-b", "--", "/bin/true"},
            base_env(), 60);
    CHECK(r.status == 2);
    CHECK(has(r.err, "-H nosuchhost-a,nosuchhost-b: this machine (" + this_host() + ") is not one of the hosts"));
  }
}
