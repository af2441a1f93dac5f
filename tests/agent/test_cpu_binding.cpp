// The split of the CPUs among local ranks (agent/src/cpu_binding.cpp) on topologies given as data,
// and the reading of a machine given as a folder of /sys and /proc files (cpu_topology.cpp).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cpu_binding.hpp"
#include "cpu_topology.hpp"

using namespace dtrain::agent;

namespace {

// `nodes` NUMA nodes of `cores` cores of `smt` hardware threads each, numbered as Linux numbers
// them on x86: the first thread of every core first (0..N-1), then the second threads (N..2N-1).
CpuTopology machine(int nodes, int cores, int smt = 1) {
  CpuTopology t;
  const int all = nodes * cores;
  for (int s = 0; s < smt; ++s)
    for (int c = 0; c < all; ++c) t.cpus.push_back({s * all + c, c, c / cores});
  return t;
}

std::vector<std::string> lists(const CpuBinding& b) {
  std::vector<std::string> out;
  for (const auto& r : b.ranks) out.push_back(cpu_list_text(r.cpus));
  return out;
}

using L = std::vector<std::string>;

}  // namespace

TEST_SUITE("agent::cpu_binding") {
  TEST_CASE("none binds nothing; two ranks on two cores take one each") {
    CHECK(bind_cpus(machine(1, 2), CpuBind::none, 2, {}).ranks.empty());
    auto b = bind_cpus(machine(1, 2), CpuBind::core, 2, {});
    CHECK(lists(b) == L{"0", "1"});
    CHECK(b.ranks[1].describe() == "CPUs 1 (1 core, NUMA node 0)");
    CHECK(b.ranks[1].threads() == 1);
    CHECK(b.notes.empty());
  }

  TEST_CASE("core: SMT siblings stay together; uneven shares differ by one core") {
    auto b = bind_cpus(machine(1, 4, 2), CpuBind::core, 2, {});
    CHECK(lists(b) == L{"0-1,4-5", "2-3,6-7"});
    CHECK(b.ranks[0].describe() == "CPUs 0-1,4-5 (2 cores, NUMA node 0)");
    CHECK(b.ranks[0].threads() == 4);
    b = bind_cpus(machine(1, 5), CpuBind::core, 3, {});
    CHECK(lists(b) == L{"0", "1-2", "3-4"});
    b = bind_cpus(machine(1, 3, 2), CpuBind::core, 3, {});
    CHECK(lists(b) == L{"0,3", "1,4", "2,5"});
  }

  TEST_CASE("core over NUMA nodes: contiguous runs in node order, no rank across two nodes when they divide") {
    auto b = bind_cpus(machine(2, 4), CpuBind::core, 4, {});
    CHECK(lists(b) == L{"0-1", "2-3", "4-5", "6-7"});
    CHECK(b.ranks[2].nodes == std::vector<int>{1});
    b = bind_cpus(machine(2, 4), CpuBind::core, 1, {});
    CHECK(b.ranks[0].describe() == "CPUs 0-7 (8 cores, NUMA nodes 0,1)");
  }

  TEST_CASE("a restricted cpuset: only the allowed CPUs, a core cut in half counts as the part allowed") {
    CpuTopology t = machine(1, 4, 2);  // cores 0-3, siblings 4-7
    std::erase_if(t.cpus, [](const CpuTopology::Cpu& c) { return c.id == 0 || c.id == 4 || c.id == 7; });
    auto b = bind_cpus(t, CpuBind::core, 3, {});
    CHECK(lists(b) == L{"1,5", "2,6", "3"});
    CHECK(b.ranks[2].cores == 1);
  }

  TEST_CASE("more ranks than cores: cores shared in turn, said, OMP threads divided") {
    auto b = bind_cpus(machine(1, 2), CpuBind::core, 5, {});
    CHECK(lists(b) == L{"0", "1", "0", "1", "0"});
    CHECK(b.ranks[0].sharers == 3);
    CHECK(b.ranks[1].sharers == 2);
    CHECK(b.ranks[0].describe() == "CPUs 0 (1 core, NUMA node 0), shared by 3 ranks");
    CHECK(b.ranks[0].threads() == 1);
    REQUIRE(b.notes.size() == 1);
    CHECK(b.notes[0].find("5 ranks on 2 cores: they share cores in turn") == 0);
    b = bind_cpus(machine(1, 1, 4), CpuBind::core, 2, {});  // one core of four threads
    CHECK(lists(b) == L{"0-3", "0-3"});
    CHECK(b.ranks[0].threads() == 2);
  }

  TEST_CASE("numa: whole nodes; fewer ranks than nodes take runs of nodes, more share them") {
    auto b = bind_cpus(machine(2, 4), CpuBind::numa, 4, {});
    CHECK(lists(b) == L{"0-3", "0-3", "4-7", "4-7"});
    CHECK(b.ranks[0].threads() == 2);
    b = bind_cpus(machine(4, 2), CpuBind::numa, 2, {});
    CHECK(lists(b) == L{"0-3", "4-7"});
    CHECK(b.ranks[1].nodes == std::vector<int>{2, 3});
    b = bind_cpus(machine(1, 2), CpuBind::numa, 2, {});
    CHECK(lists(b) == L{"0-1", "0-1"});
    CHECK(b.ranks[0].threads() == 1);
  }

  TEST_CASE("GPUs: each rank's share from its GPU's node; an unknown node falls back, said") {
    // GPUs 0 and 2 on node 1, GPU 1 on node 0
    auto b = bind_cpus(machine(2, 4), CpuBind::core, 3, {1, 0, 1});
    CHECK(lists(b) == L{"4-5", "0-3", "6-7"});
    CHECK(b.notes.empty());
    b = bind_cpus(machine(2, 4), CpuBind::numa, 3, {1, 0, 1});
    CHECK(lists(b) == L{"4-7", "0-3", "4-7"});
    b = bind_cpus(machine(2, 4), CpuBind::core, 2, {1, -1});
    CHECK(lists(b) == L{"0-3", "4-7"});
    REQUIRE(b.notes.size() == 1);
    CHECK(b.notes[0] == "the NUMA node of GPU 1 is not known: the ranks take the CPUs as without GPUs");
    b = bind_cpus(machine(2, 4), CpuBind::core, 1, {3});
    CHECK(b.notes.at(0).find("GPU 0 is on NUMA node 3, where this agent may use no CPU") == 0);
  }

  TEST_CASE("cpulist text both ways") {
    std::vector<int> v;
    CHECK(parse_cpu_list("0-3,8,10-11\n", v));
    CHECK(v == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
    CHECK(cpu_list_text(v) == "0-3,8,10-11");
    CHECK(parse_cpu_list("", v));
    CHECK(v.empty());
    CHECK_FALSE(parse_cpu_list("3-1", v));
    CHECK_FALSE(parse_cpu_list("a", v));
    CHECK_FALSE(parse_cpu_list("1,", v));
  }

  TEST_CASE("a machine read from /sys and /proc files: siblings, nodes, a GPU's node") {
    namespace fs = std::filesystem;
    const fs::path root = fs::temp_directory_path() / ("dtrain-topo-" + std::to_string(::getpid()));
    auto put = [&](const fs::path& rel, const std::string& text) {
      fs::create_directories((root / rel).parent_path());
      std::ofstream(root / rel) << text;
    };
    for (int c = 0; c < 4; ++c)  // 2 cores of 2 threads: siblings 0,2 and 1,3
      put(fmt::format("sys/devices/system/cpu/cpu{}/topology/thread_siblings_list", c), c % 2 ? "1,3\n" : "0,2\n");
    put("sys/devices/system/node/node0/cpulist", "0,2\n");
    put("sys/devices/system/node/node1/cpulist", "1,3\n");
    put("sys/devices/system/node/possible", "0-1\n");
    put("proc/driver/nvidia/gpus/0000:3b:00.0/information", "Model: X\nIRQ: 1\nDevice Minor: 1\n");
    put("sys/bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
    put("proc/driver/nvidia/gpus/0000:1a:00.0/information", "Device Minor: 0\n");
    put("sys/bus/pci/devices/0000:1a:00.0/numa_node", "-1\n");

    CpuTopology t = read_cpu_topology({0, 1, 3}, root / "sys");
    REQUIRE(t.cpus.size() == 3);
    CHECK(t.cpus[2].id == 3);
    CHECK(t.cpus[2].core == 1);
    CHECK(t.cpus[2].node == 1);
    CHECK(t.cpus[0].node == 0);
    CHECK(gpu_numa_nodes(root / "proc", root / "sys") == std::map<int, int>{{1, 1}});
    // nothing to read: each CPU its own core on node 0, no GPU
    CpuTopology bare = read_cpu_topology({5}, root / "none");
    CHECK((bare.cpus[0].core == 5 && bare.cpus[0].node == 0));
    CHECK(gpu_numa_nodes(root / "none", root / "none").empty());
    fs::remove_all(root);
  }

  TEST_CASE("this process's affinity mask is what it may use") {
    std::vector<int> mine = allowed_cpus();
    REQUIRE_FALSE(mine.empty());
    CHECK(static_cast<long>(mine.size()) <= ::sysconf(_SC_NPROCESSORS_CONF));
  }
}
