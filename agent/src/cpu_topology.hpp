#pragma once
// Where the CPU binding's snapshot of the machine comes from (cpu_binding.hpp): the CPUs this
// process may use (sched_getaffinity: the kernel keeps a task's affinity inside its cgroup's
// cpuset.cpus.effective, so this is the cpuset too), their SMT siblings
// (SYS/devices/system/cpu/cpuN/topology/thread_siblings_list), their NUMA nodes
// (SYS/devices/system/node/nodeN/cpulist), and the NUMA node of each NVIDIA GPU
// (PROC/driver/nvidia/gpus/BUSID/information's "Device Minor" N is /dev/nvidiaN, and
// SYS/bus/pci/devices/BUSID/numa_node its node). The roots are parameters so that tests give a
// machine as a folder of files. What cannot be read is taken as absent: a CPU its own core, a
// machine without nodes one node 0, a GPU's node unknown.
#include <filesystem>
#include <map>
#include <vector>

#include "cpu_binding.hpp"

namespace dtrain::agent {

// The CPUs of this process's affinity mask, ascending.
std::vector<int> allowed_cpus();

// `allowed` with each CPU's core and node as `sys_root` shows them.
CpuTopology read_cpu_topology(const std::vector<int>& allowed, const std::filesystem::path& sys_root = "/sys");

// The NUMA node of each GPU that shows one, by its device minor (/dev/nvidiaN).
std::map<int, int> gpu_numa_nodes(const std::filesystem::path& proc_root = "/proc",
                                  const std::filesystem::path& sys_root = "/sys");

}  // namespace dtrain::agent
