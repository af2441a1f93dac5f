// --cpu-bind through the real binary: each worker's own view of its CPUs (Cpus_allowed_list in
// /proc/self/status) and OMP_NUM_THREADS, and the line per rank that says what it got. The launcher
// runs on two CPUs of ours that are not SMT siblings (its affinity, as a cpuset or taskset would
// give it), so the expectations hold on any machine with two such CPUs.
#include <doctest/doctest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "agent_test_util.hpp"
#include "cpu_binding.hpp"
#include "cpu_topology.hpp"
#include "test_needs.hpp"

using namespace agent_test;
using dtrain::agent::allowed_cpus;
using dtrain::agent::read_cpu_topology;

namespace {

// Two CPUs of ours on different cores, in the order the binding takes them (by NUMA node, then
// core); empty when there are none.
std::vector<int> two_cores() {
  auto topo = read_cpu_topology(allowed_cpus());
  for (const auto& a : topo.cpus)
    for (const auto& b : topo.cpus)
      if (a.core != b.core && (a.node < b.node || (a.node == b.node && a.core < b.core))) return {a.id, b.id};
  return {};
}

const dtrain::test::Need need_two_cores("two_cores", [] {
  return two_cores().empty() ? std::string("this process may use fewer than two cores (CPUs that are not SMT siblings)")
                             : std::string();
});

// Each worker writes its Cpus_allowed_list and OMP_NUM_THREADS to cpus.RANK.
const char* kJob = R"({"command": ["sh", "-c",
  "{ grep Cpus_allowed_list /proc/self/status | cut -f2; echo \"$OMP_NUM_THREADS\"; } > cpus.$RANK"]})";

// A launch of kJob that succeeded: the CPUs it ran on, what the launcher said, what each rank saw.
struct Bound {
  std::vector<int> cpus = two_cores();
  TempDir t;
  std::string err;

  // `dtrain launch ARGS job.json` (with `env_words` before it) run by sh in t, on `cpus` only.
  Bound(const std::string& env_words, const std::string& args);
  // Cpus_allowed_list and OMP_NUM_THREADS of `rank`.
  std::vector<std::string> seen(int rank) const { return lines_of(slurp(t.path / fmt::format("cpus.{}", rank))); }
};

Bound::Bound(const std::string& env_words, const std::string& args) {
  REQUIRE(cpus.size() == 2);
  write_file(t.path / "job.json", kJob);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0 || ::chdir(t.path.c_str()) != 0) _exit(125);
    std::string cmd = fmt::format("env -u OMP_NUM_THREADS DTRAIN_TEST_GPUS=0 {} {} launch {} job.json 2>launch.err >launch.out",
                                  env_words, DTRAIN_BIN, args);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const int rc = wait_child(pid, 120);
  err = slurp(t.path / "launch.err");
  INFO(err);
  REQUIRE(rc == 0);
}

}  // namespace

TEST_SUITE("agent::cpu_bind") {
  TEST_CASE("--cpu-bind core: two ranks on two cores take one each, OMP_NUM_THREADS 1, one line each") {
    const Bound b("", "--cpu-bind core --nproc-per-node 2");
    for (int r = 0; r < 2; ++r) {
      CHECK(b.seen(r) == std::vector<std::string>{std::to_string(b.cpus[r]), "1"});
      CHECK(b.err.find(fmt::format("dtrain: rank {} (local rank {}) bound to CPUs {} (1 core, NUMA node", r, r,
                                   b.cpus[r])) != std::string::npos);
    }
  }

  TEST_CASE("--bind-to core with more ranks than cores: shared in turn and said; OMP_NUM_THREADS of the user wins") {
    const Bound b("OMP_NUM_THREADS=5", "--bind-to core --nproc-per-node 3");
    CHECK(b.seen(0) == std::vector<std::string>{std::to_string(b.cpus[0]), "5"});
    CHECK(b.seen(1) == std::vector<std::string>{std::to_string(b.cpus[1]), "5"});
    CHECK(b.seen(2) == std::vector<std::string>{std::to_string(b.cpus[0]), "5"});
    CHECK(b.err.find("dtrain: cpu-bind core: 3 ranks on 2 cores: they share cores in turn") != std::string::npos);
    CHECK(b.err.find(fmt::format("rank 2 (local rank 2) bound to CPUs {} (1 core, NUMA node", b.cpus[0])) !=
          std::string::npos);
    CHECK(b.err.find("shared by 2 ranks") != std::string::npos);
  }

  TEST_CASE("--cpu-bind none (the default): every worker keeps all the launcher's CPUs, and nothing is reported") {
    for (const char* args : {"--cpu-bind none --nproc-per-node 2", "--nproc-per-node 2"}) {
      CAPTURE(args);
      const Bound b("", args);
      const std::string both = dtrain::agent::cpu_list_text({std::min(b.cpus[0], b.cpus[1]), std::max(b.cpus[0], b.cpus[1])});
      for (int r = 0; r < 2; ++r) CHECK(b.seen(r) == std::vector<std::string>{both, "1"});
      CHECK(b.err.find("bound to") == std::string::npos);
    }
  }
}
