// The machine as the CPU binding sees it (cpu_topology.hpp).
#include "cpu_topology.hpp"

#include <sched.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace dtrain::agent {

namespace fs = std::filesystem;

namespace {

// The first line of a file ("" when it cannot be read).
std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// N of a name "PREFIXN" (-1 when it is not one).
int index_of(const std::string& name, std::string_view prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return -1;
  int n = -1;
  auto [p, ec] = std::from_chars(name.data() + prefix.size(), name.data() + name.size(), n);
  return ec == std::errc{} && p == name.data() + name.size() ? n : -1;
}

}  // namespace

std::vector<int> allowed_cpus() {
  // A mask as large as the kernel's (CPU_ALLOC grows past cpu_set_t's 1024 CPUs when it must).
  for (int size = 1024; size <= 1 << 20; size *= 4) {
    cpu_set_t* set = CPU_ALLOC(size);
    const std::size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) == 0) {
      std::vector<int> out;
      for (int i = 0; i < size; ++i)
        if (CPU_ISSET_S(i, bytes, set)) out.push_back(i);
      CPU_FREE(set);
      return out;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;
  }
  return {};
}

CpuTopology read_cpu_topology(const std::vector<int>& allowed, const fs::path& sys_root) {
  std::map<int, int> node_of;
  std::error_code ec;
  const fs::path nodes = sys_root / "devices/system/node";
  for (fs::directory_iterator it(nodes, ec), end; !ec && it != end; it.increment(ec)) {
    const int node = index_of(it->path().filename().string(), "node");
    std::vector<int> cpus;
    if (node < 0 || !parse_cpu_list(first_line(it->path() / "cpulist"), cpus)) continue;
    for (int c : cpus) node_of.emplace(c, node);
  }
  CpuTopology topo;
  for (int id : allowed) {
    CpuTopology::Cpu cpu{id, id, 0};
    std::vector<int> siblings;
    const fs::path dir = sys_root / "devices/system/cpu" / ("cpu" + std::to_string(id)) / "topology";
    if (parse_cpu_list(first_line(dir / "thread_siblings_list"), siblings) && !siblings.empty()) cpu.core = siblings[0];
    if (auto it = node_of.find(id); it != node_of.end()) cpu.node = it->second;
    topo.cpus.push_back(cpu);
  }
  return topo;
}

std::map<int, int> gpu_numa_nodes(const fs::path& proc_root, const fs::path& sys_root) {
  std::map<int, int> out;
  std::error_code ec;
  for (fs::directory_iterator it(proc_root / "driver/nvidia/gpus", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string bus = it->path().filename().string();
    std::ifstream info(it->path() / "information");
    int minor = -1;
    for (std::string line; minor < 0 && std::getline(info, line);)
      if (line.rfind("Device Minor:", 0) == 0) std::istringstream(line.substr(13)) >> minor;
    int node = -1;
    std::istringstream(first_line(sys_root / "bus/pci/devices" / bus / "numa_node")) >> node;
    if (minor >= 0 && node >= 0) out[minor] = node;  // the kernel writes -1 for "no node"
  }
  return out;
}

}  // namespace dtrain::agent
