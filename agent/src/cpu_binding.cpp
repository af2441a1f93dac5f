// Each local rank's share of the CPUs (cpu_binding.hpp).
#include "cpu_binding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "dtrain/common/text.hpp"

namespace dtrain::agent {

namespace {

struct Core {
  std::vector<int> cpus;
  int node = 0;
};

// The cores of `topo`, in NUMA-node order, then by their first CPU.
std::vector<Core> cores_of(const CpuTopology& topo) {
  std::map<std::pair<int, int>, Core> by_key;  // (node, core id)
  for (const auto& c : topo.cpus) {
    Core& core = by_key[{c.node, c.core}];
    core.node = c.node;
    core.cpus.push_back(c.id);
  }
  std::vector<Core> out;
  for (auto& [key, core] : by_key) {
    std::sort(core.cpus.begin(), core.cpus.end());
    out.push_back(std::move(core));
  }
  return out;
}

RankCpus share_of(const std::vector<const Core*>& cores) {
  RankCpus r;
  std::set<int> nodes;
  for (const Core* c : cores) {
    r.cpus.insert(r.cpus.end(), c->cpus.begin(), c->cpus.end());
    nodes.insert(c->node);
  }
  std::sort(r.cpus.begin(), r.cpus.end());
  r.cores = static_cast<int>(cores.size());
  r.nodes.assign(nodes.begin(), nodes.end());
  return r;
}

// Splits `cores` among the local ranks `ranks` (contiguous runs; in turn when there are more ranks).
void split_cores(const std::vector<const Core*>& cores, const std::vector<int>& ranks, CpuBinding& out) {
  const std::size_t n = ranks.size(), c = cores.size();
  if (n == 0 || c == 0) return;
  if (n > c)
    out.notes.push_back(fmt::format("{} ranks on {} core{}: they share cores in turn (the i-th of them on core "
                                    "i mod {}), so some run slower than the others",
                                    n, c, c == 1 ? "" : "s", c));
  for (std::size_t j = 0; j < n; ++j) {
    std::vector<const Core*> mine;
    if (n > c) mine.push_back(cores[j % c]);
    else
      for (std::size_t k = j * c / n; k < (j + 1) * c / n; ++k) mine.push_back(cores[k]);
    out.ranks[static_cast<std::size_t>(ranks[j])] = share_of(mine);
  }
}

// Which local ranks are bound to the very same CPUs, counted into each one's `sharers`.
void count_sharers(CpuBinding& b) {
  std::map<std::vector<int>, int> count;
  for (const auto& r : b.ranks) ++count[r.cpus];
  for (auto& r : b.ranks) r.sharers = count[r.cpus];
}

// Every rank's GPU is on a known node that has some of our CPUs.
bool gpu_nodes_usable(const std::vector<int>& gpu_nodes, int local_ranks, const std::map<int, std::vector<const Core*>>& by_node,
                      CpuBinding& out) {
  if (gpu_nodes.empty()) return false;
  for (int i = 0; i < local_ranks; ++i) {
    const int node = i < static_cast<int>(gpu_nodes.size()) ? gpu_nodes[static_cast<std::size_t>(i)] : -1;
    if (node >= 0 && by_node.count(node)) continue;
    out.notes.push_back(
        node < 0 ? fmt::format("the NUMA node of GPU {} is not known: the ranks take the CPUs as without GPUs", i)
                 : fmt::format("GPU {} is on NUMA node {}, where this agent may use no CPU: the ranks take the "
                               "CPUs as without GPUs", i, node));
    return false;
  }
  return true;
}

}  // namespace

CpuBind cpu_bind_of(std::string_view word) {
  return word == "core" ? CpuBind::core : word == "numa" ? CpuBind::numa : CpuBind::none;
}

int RankCpus::threads() const { return std::max(1, static_cast<int>(cpus.size()) / std::max(1, sharers)); }

std::string RankCpus::describe() const {
  std::vector<std::string> node_ids;
  for (int n : nodes) node_ids.push_back(std::to_string(n));
  return fmt::format("CPUs {} ({} core{}, NUMA node{} {}){}", cpu_list_text(cpus), cores, cores == 1 ? "" : "s",
                     nodes.size() == 1 ? "" : "s", text::join(node_ids, ","),
                     sharers > 1 ? fmt::format(", shared by {} ranks", sharers) : std::string());
}

CpuBinding bind_cpus(const CpuTopology& topo, CpuBind mode, int local_ranks, const std::vector<int>& gpu_nodes) {
  CpuBinding out;
  const std::vector<Core> cores = cores_of(topo);
  if (mode == CpuBind::none || local_ranks <= 0) return out;
  if (cores.empty()) {
    out.notes.push_back("the CPUs this agent may use could not be read: the workers run unbound");
    return out;
  }
  out.ranks.resize(static_cast<std::size_t>(local_ranks));
  std::map<int, std::vector<const Core*>> by_node;
  std::vector<const Core*> all;
  for (const Core& c : cores) {
    by_node[c.node].push_back(&c);
    all.push_back(&c);
  }
  std::vector<int> ranks(static_cast<std::size_t>(local_ranks));
  for (int i = 0; i < local_ranks; ++i) ranks[static_cast<std::size_t>(i)] = i;

  if (gpu_nodes_usable(gpu_nodes, local_ranks, by_node, out)) {
    std::map<int, std::vector<int>> ranks_on;  // node -> the local ranks whose GPU is there
    for (int i = 0; i < local_ranks; ++i) ranks_on[gpu_nodes[static_cast<std::size_t>(i)]].push_back(i);
    for (const auto& [node, on] : ranks_on) {
      if (mode == CpuBind::core) split_cores(by_node[node], on, out);
      else
        for (int i : on) out.ranks[static_cast<std::size_t>(i)] = share_of(by_node[node]);
    }
  } else if (mode == CpuBind::core) {
    split_cores(all, ranks, out);
  } else {
    std::vector<const std::vector<const Core*>*> nodes;
    for (const auto& [node, list] : by_node) nodes.push_back(&list);
    const std::size_t n = ranks.size(), m = nodes.size();
    for (std::size_t j = 0; j < n; ++j) {
      std::vector<const Core*> mine;
      const std::size_t first = j * m / n, last = n >= m ? first + 1 : (j + 1) * m / n;
      for (std::size_t k = first; k < last; ++k) mine.insert(mine.end(), nodes[k]->begin(), nodes[k]->end());
      out.ranks[j] = share_of(mine);
    }
  }
  count_sharers(out);
  return out;
}

std::string cpu_list_text(const std::vector<int>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return out;
}

bool parse_cpu_list(std::string_view text, std::vector<int>& out) {
  out.clear();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return true;  // an empty list (a node without CPUs)
  for (const std::string& part : text::split(text, ',')) {
    const auto dash = part.find('-');
    int lo = -1, hi = -1;
    const char* end = part.data() + part.size();
    const char* mid = dash == std::string::npos ? end : part.data() + dash;
    auto [p1, e1] = std::from_chars(part.data(), mid, lo);
    if (e1 != std::errc{} || p1 != mid || lo < 0) return false;
    hi = lo;
    if (dash != std::string::npos) {
      auto [p2, e2] = std::from_chars(mid + 1, end, hi);
      if (e2 != std::errc{} || p2 != end || hi < lo) return false;
    }
    if (hi - lo > 1 << 20) return false;
    for (int i = lo; i <= hi; ++i) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return true;
}

}  // namespace dtrain::agent
