#pragma once
// Each local rank's share of the CPUs this agent may use (cluster.cpu_bind, --cpu-bind), as mpirun's
// --bind-to core|numa and Slurm's --cpu-bind give it: worked out from a snapshot of the machine
// (CpuTopology: the CPUs of the agent's affinity mask, which the kernel keeps inside its cgroup's
// cpuset, each with its core and NUMA node), so that the split itself is pure and tested on
// topologies given as data (tests/agent/test_cpu_binding.cpp). cpu_topology.cpp reads the snapshot
// from /sys; the worker's affinity is set between its fork and its exec (spawn.hpp).
//
//   core: the cores, in NUMA-node order, split into contiguous runs, one per rank, sizes differing
//         by at most one; the SMT siblings of a core always go together. More ranks than cores:
//         rank i takes core i mod cores (ranks share cores in turn), said in a note.
//   numa: whole NUMA nodes: with fewer ranks than nodes each rank takes a contiguous run of nodes,
//         else rank i takes node i * nodes / ranks (ranks share it).
//   With GPUs (one per local rank, GPU i for local rank i) whose NUMA nodes are all known, each
//   rank's share comes from its GPU's node: core splits each node's cores among the ranks whose GPU
//   is there, numa gives the node. A GPU whose node is unknown: the split as without GPUs, said.
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::agent {

enum class CpuBind { none, core, numa };

// The spec's word ("none", "core", "numa"; already checked by the spec's field registry).
CpuBind cpu_bind_of(std::string_view word);

// The CPUs this agent may use, by id, each with its core (the lowest CPU id among its SMT
// siblings) and its NUMA node (0 where the machine shows none).
struct CpuTopology {
  struct Cpu {
    int id = 0;
    int core = 0;
    int node = 0;
  };
  std::vector<Cpu> cpus;
};

// One local rank's share.
struct RankCpus {
  std::vector<int> cpus;   // ascending
  int cores = 0;
  std::vector<int> nodes;  // ascending
  int sharers = 1;         // local ranks bound to these same CPUs, this one included

  // OMP_NUM_THREADS for it: its CPUs divided among the ranks that share them, at least 1.
  int threads() const;
  // "CPUs 0-3 (2 cores, NUMA node 0)", ", shared by 2 ranks" when shared.
  std::string describe() const;
};

struct CpuBinding {
  std::vector<RankCpus> ranks;     // by local rank; empty for CpuBind::none
  std::vector<std::string> notes;  // how the ranks share cores, GPUs of unknown node
};

// The share of each of `local_ranks` ranks. `gpu_nodes`: the NUMA node of local rank i's GPU (-1:
// unknown); empty when the job uses no GPUs. A topology without CPUs binds nothing (said in a note).
CpuBinding bind_cpus(const CpuTopology& topo, CpuBind mode, int local_ranks, const std::vector<int>& gpu_nodes);

// "0-3,8,10-11" (the kernel's cpulist format) and back; parse_cpu_list returns false on bad text.
std::string cpu_list_text(const std::vector<int>& ids);
bool parse_cpu_list(std::string_view text, std::vector<int>& out);

}  // namespace dtrain::agent
