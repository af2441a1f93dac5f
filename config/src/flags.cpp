// The node and worker counts of torchrun's flags (--nnodes, --nproc-per-node) into Overrides; a bad
// value becomes a flag problem, reported with the spec's problems.
#include <charconv>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "dtrain/config/spec.hpp"

namespace dtrain::config {

// "--nnodes 2", "2:2", or an elastic range MIN:MAX.
void set_nnodes(Overrides& o, const std::string& text) {
  auto whole = [](std::string_view s) -> std::optional<int> {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
  };
  auto colon = text.find(':');
  auto lo = whole(std::string_view(text).substr(0, colon));
  auto hi = colon == std::string::npos ? lo : whole(std::string_view(text).substr(colon + 1));
  if (!lo || !hi) {
    o.flag_problems.push_back({"--nnodes", fmt::format("'{}' is not a node count; expected N (e.g. 2) or MIN:MAX", text)});
  } else if (colon != std::string::npos && (*lo < 1 || *lo > *hi)) {
    o.flag_problems.push_back({"--nnodes", fmt::format("{} is not a node range; expected MIN:MAX with 1 <= MIN <= MAX, "
                                                       "e.g. 2:4", text)});
  } else {
    o.nodes = *hi;
    o.min_nodes = colon == std::string::npos || *lo == *hi ? std::nullopt : std::optional<int>(*lo);
  }
}

// "--nproc-per-node 4", or gpu (one per visible GPU), cpu (one per CPU), auto (GPUs if any, else CPUs).
void set_nproc_per_node(Overrides& o, const std::string& text) {
  o.nproc_mode.reset();
  o.nproc_per_node.reset();
  if (text == "gpu" || text == "cpu" || text == "auto") {
    o.nproc_mode = text;
    return;
  }
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size())
    o.flag_problems.push_back(
        {"--nproc-per-node", fmt::format("'{}' is not a worker count; expected a number, gpu, cpu or auto", text)});
  else
    o.nproc_per_node = v;
}

// "--rdzv-backend etcd": c10d and static name the built-in rendezvous, etcd-v2 the etcd one.
void set_rdzv_backend(Overrides& o, const std::string& text) {
  if (text == "builtin" || text == "c10d" || text == "static") o.rdzv_backend = "builtin";
  else if (text == "etcd" || text == "etcd-v2") o.rdzv_backend = "etcd";
  else
    o.flag_problems.push_back({"--rdzv-backend", fmt::format("{} is not a rendezvous backend; expected builtin (c10d and "
                                                             "static name it too) or etcd (etcd-v2 too)", text)});
}

}  // namespace dtrain::config
