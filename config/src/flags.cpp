// The node and worker counts of torchrun's flags (--nnodes, --nproc-per-node) into Overrides; a bad
// value becomes a flag problem, reported with the spec's problems.
#include <charconv>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
  if (text == "xpu") {  // torch 2.x's Intel GPUs
    o.flag_problems.push_back({"--nproc-per-node", "xpu: dtrain runs CUDA GPU or CPU workers; give a count, gpu, cpu or "
                                                   "auto"});
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

namespace dtrain::config {
namespace {

// torchrun's rendezvous configuration keys (its c10d, static and etcd backends) and the spec field
// each sets; a key with no field is accepted with a note saying what dtrain does instead.
struct ConfKey {
  const char* key;
  const char* pointer;  // nullptr: a note
  const char* note;
};

// clang-format off
constexpr ConfKey kConfKeys[] = {
  {"join_timeout", "/rendezvous/join_timeout_s", nullptr},
  {"timeout", "/rendezvous/join_timeout_s", nullptr},
  {"last_call_timeout", "/rendezvous/last_call_s", nullptr},
  {"heartbeat_timeout", "/rendezvous/heartbeat_timeout_s", nullptr},
  {"keep_alive_interval", "/rendezvous/heartbeat_s", nullptr},
  {"cacert", "/rendezvous/etcd/cacert", nullptr},
  {"ca_cert", "/rendezvous/etcd/cacert", nullptr},
  {"cert", "/rendezvous/etcd/cert", nullptr},
  {"ssl_cert", "/rendezvous/etcd/cert", nullptr},
  {"key", "/rendezvous/etcd/key", nullptr},
  {"ssl_cert_key", "/rendezvous/etcd/key", nullptr},
  {"keep_alive_max_attempt", nullptr, "a node is lost after rendezvous.heartbeat_timeout_s of silence (default 3 x heartbeat_s); give heartbeat_timeout=SECONDS"},
  {"close_timeout", nullptr, "a stopping node ends its generation at once; there is no close timeout"},
  {"read_timeout", nullptr, "each store call waits as long as its own deadline (the join: join_timeout_s; the workers': DTRAIN_COLL_TIMEOUT_S)"},
  {"is_host", nullptr, "node rank 0's agent serves the store (or dtrain rendezvous serve)"},
  {"store_type", nullptr, "the store is dtrain's own TCP store"},
  {"use_agent_store", nullptr, "the workers' MASTER_PORT store is rank 0's own, as torchrun's default"},
  {"rank", nullptr, "the node rank is --node-rank (or the environment's)"},
  {"protocol", nullptr, "etcd is reached over https when a TLS file (cacert, cert, key) is given, else http"},
  {"etcd_prefix", nullptr, "dtrain's etcd keys live under the run id"},
};
// clang-format on

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::optional<std::string> rdzv_conf_pointer(const std::string& key) {
  for (const auto& k : kConfKeys)
    if (key == k.key && k.pointer != nullptr) return std::string(k.pointer);
  return std::nullopt;
}

std::vector<std::string> rdzv_conf_keys() {
  std::vector<std::string> out;
  for (const auto& k : kConfKeys) out.emplace_back(k.key);
  return out;
}

void set_rdzv_conf(Overrides& o, const std::string& text, std::vector<std::string>& notes) {
  std::string_view rest = text;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    std::string key = trim(std::string_view(item).substr(0, eq));
    std::string value = eq == std::string::npos ? std::string() : trim(std::string_view(item).substr(eq + 1));
    if (key.empty() || value.empty()) {
      o.flag_problems.push_back({"--rdzv-conf", fmt::format("'{}' is not KEY=VALUE; expected KEY=VALUE,..., e.g. "
                                                            "--rdzv-conf join_timeout=60,last_call_timeout=10", item)});
      continue;
    }
    const ConfKey* k = nullptr;
    for (const auto& c : kConfKeys)
      if (key == c.key) k = &c;
    if (k == nullptr) {
      o.flag_problems.push_back({"--rdzv-conf", fmt::format("unknown key '{}'; the keys dtrain reads: {} (see "
                                                            "dtrain-launch(1), TORCHRUN FLAGS)", key,
                                                            fmt::join(rdzv_conf_keys(), ", "))});
      continue;
    }
    if (k->pointer == nullptr) {
      notes.push_back(fmt::format("--rdzv-conf {}={}: not used; {}", key, value, k->note));
      continue;
    }
    bool path = std::string_view(k->pointer).find("/etcd/") != std::string_view::npos;
    o.flag_sets.push_back({k->pointer, value, path, "--rdzv-conf " + key});
  }
}

}  // namespace dtrain::config
