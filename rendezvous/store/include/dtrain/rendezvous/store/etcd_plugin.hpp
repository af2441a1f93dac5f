#pragma once
// The etcd rendezvous backend's plugin and its Store, as the agent and the collectives library reach
// them. The backend lives in a plugin, libdtrain_etcd.so (it links libcurl), loaded with dlopen on
// first use, so that a launch with the built-in rendezvous never loads it. The plugin is looked for
// next to the binary or library that asks (and in ../lib from there), then on the loader's search
// path; DTRAIN_ETCD_PLUGIN names it exactly. Its Membership: membership/etcd_membership.hpp.
//
// Errors: ConfigError when the plugin cannot be loaded (this build has no etcd support) or a TLS or
// password file cannot be read; otherwise what the backend throws (store.hpp).
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::rdzv {

struct EtcdSettings {
  std::string endpoint;  // "host:port" of an etcd member
  std::string cacert, cert, key;  // any of them set: https
  std::string user, password_file;
  std::chrono::milliseconds timeout{5000};  // connecting and each request (a watch waits longer)

  bool tls() const { return !cacert.empty() || !cert.empty() || !key.empty(); }
};

// The plugin's entry point `name` (dlsym), the plugin loaded on first use; ConfigError when it
// cannot be loaded.
void* etcd_plugin_symbol(const char* name);
// The workers' store of (run_id, generation), in etcd.
std::unique_ptr<Store> open_etcd_store(const EtcdSettings& s, const std::string& run_id, int generation);

// The workers learn the backend from their environment: DTRAIN_STORE_ADDR "etcd://host:port"
// (etcd_store_addr) and DTRAIN_ETCD_CACERT, _CERT, _KEY, _USER, _PASSWORD_FILE (etcd_worker_env).
inline constexpr const char* kEtcdScheme = "etcd://";
inline std::string etcd_store_addr(const EtcdSettings& s) { return kEtcdScheme + s.endpoint; }
std::vector<std::pair<std::string, std::string>> etcd_worker_env(const EtcdSettings& s);
EtcdSettings etcd_settings_from_env(const std::string& store_addr);  // store_addr starts with kEtcdScheme

}  // namespace dtrain::rdzv
