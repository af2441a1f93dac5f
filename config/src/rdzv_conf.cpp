// torchrun's --rdzv-conf KEY=VALUE,...: its rendezvous keys as the spec fields they mean; a key
// with no field is accepted with a note saying what dtrain does instead.
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launch_internal.hpp"

namespace dtrain::config::detail {
namespace {

struct ConfKey {
  const char* key;
  const char* pointer;  // nullptr: a note
  const char* note;
};

// torchrun's c10d, static and etcd backends' keys
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

std::vector<std::string> conf_keys() {
  std::vector<std::string> out;
  for (const auto& k : kConfKeys) out.emplace_back(k.key);
  return out;
}

}  // namespace

std::optional<std::string> rdzv_conf_pointer(const std::string& key) {
  for (const auto& k : kConfKeys)
    if (key == k.key && k.pointer != nullptr) return std::string(k.pointer);
  return std::nullopt;
}

void read_rdzv_conf(const FlagRow&, const std::string& text, FlagSink& sink) {
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
      sink.problem(fmt::format("'{}' is not KEY=VALUE; expected KEY=VALUE,..., e.g. --rdzv-conf "
                               "join_timeout=60,last_call_timeout=10", item));
      continue;
    }
    const ConfKey* k = nullptr;
    for (const auto& c : kConfKeys)
      if (key == c.key) k = &c;
    if (k == nullptr) {
      sink.problem(fmt::format("unknown key '{}'; the keys dtrain reads: {} (see dtrain-launch(1), TORCHRUN FLAGS)", key,
                               fmt::join(conf_keys(), ", ")));
    } else if (k->pointer == nullptr) {
      sink.note(fmt::format("--rdzv-conf {}={}: not used; {}", key, value, k->note));
    } else if (auto v = sink.typed(find_field(k->pointer), value, "--rdzv-conf " + key)) {
      sink.spec(k->pointer, *v, "--rdzv-conf " + key);
    }
  }
}

}  // namespace dtrain::config::detail
