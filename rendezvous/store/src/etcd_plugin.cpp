// Loading the etcd backend's plugin, and its Store (etcd_plugin.hpp).
#include "dtrain/rendezvous/store/etcd_plugin.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "dtrain/common/errors.hpp"

extern "C" {
using dtrain_etcd_version_fn = const char* (*)();
using dtrain_etcd_store_fn = dtrain::rdzv::Store* (*)(const dtrain::rdzv::EtcdSettings*, const char*, int);
}

namespace dtrain::rdzv {
namespace {

constexpr const char* kPlugin = "libdtrain_etcd.so";

// Where to look: DTRAIN_ETCD_PLUGIN, then next to the object this code is linked into (the dtrain
// binary or libdtrain_collectives.so), its lib/ and ../lib/, then the loader's search path.
std::vector<std::string> candidates() {
  if (const char* p = std::getenv("DTRAIN_ETCD_PLUGIN"); p != nullptr && *p != '\0') return {p};
  std::vector<std::string> out;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&candidates), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    auto self = std::filesystem::canonical(info.dli_fname, ec);
    if (!ec)
      for (const char* sub : {"", "lib", "../lib", DTRAIN_ETCD_PLUGIN_RELDIR})
        out.push_back((self.parent_path() / sub / kPlugin).lexically_normal().string());
  }
  out.emplace_back(kPlugin);
  return out;
}

// The plugin's handle (never unloaded: a plugin, once in, stays).
void* load() {
  std::string errors;
  for (const auto& path : candidates()) {
    if (path.find('/') != std::string::npos && !std::filesystem::exists(path)) continue;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      errors += fmt::format("\n  {}: {}", path, dlerror());
      continue;
    }
    auto version = reinterpret_cast<dtrain_etcd_version_fn>(dlsym(h, "dtrain_etcd_version"));
    if (version == nullptr || std::string(version()) != DTRAIN_VERSION) {
      errors += fmt::format("\n  {}: not dtrain {}'s etcd plugin", path, DTRAIN_VERSION);
      continue;
    }
    return h;
  }
  throw ConfigError(fmt::format("the etcd rendezvous backend needs {}, which was not found or not loaded{}; build "
                                "dtrain with libcurl (libcurl4-openssl-dev) installed, set DTRAIN_ETCD_PLUGIN to the "
                                "plugin's path, or use rendezvous.backend \"builtin\"",
                                kPlugin, errors.empty() ? "" : ":" + errors));
}

void* plugin() {
  static std::once_flag once;
  static void* handle = nullptr;
  static std::exception_ptr failed;
  std::call_once(once, [] {
    try {
      handle = load();
    } catch (...) {
      failed = std::current_exception();
    }
  });
  if (failed) std::rethrow_exception(failed);
  return handle;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

void* etcd_plugin_symbol(const char* name) {
  void* sym = dlsym(plugin(), name);
  if (sym == nullptr)
    throw ConfigError(fmt::format("{} has no entry point {}: not dtrain {}'s etcd plugin", kPlugin, name, DTRAIN_VERSION));
  return sym;
}

std::unique_ptr<Store> open_etcd_store(const EtcdSettings& s, const std::string& run_id, int generation) {
  auto open = reinterpret_cast<dtrain_etcd_store_fn>(etcd_plugin_symbol("dtrain_etcd_store"));
  return std::unique_ptr<Store>(open(&s, run_id.c_str(), generation));
}

std::vector<std::pair<std::string, std::string>> etcd_worker_env(const EtcdSettings& s) {
  return {{"DTRAIN_ETCD_CACERT", s.cacert},
          {"DTRAIN_ETCD_CERT", s.cert},
          {"DTRAIN_ETCD_KEY", s.key},
          {"DTRAIN_ETCD_USER", s.user},
          {"DTRAIN_ETCD_PASSWORD_FILE", s.password_file}};
}

EtcdSettings etcd_settings_from_env(const std::string& store_addr) {
  EtcdSettings s;
  s.endpoint = store_addr.substr(std::string_view(kEtcdScheme).size());
  s.cacert = env_or_empty("DTRAIN_ETCD_CACERT");
  s.cert = env_or_empty("DTRAIN_ETCD_CERT");
  s.key = env_or_empty("DTRAIN_ETCD_KEY");
  s.user = env_or_empty("DTRAIN_ETCD_USER");
  s.password_file = env_or_empty("DTRAIN_ETCD_PASSWORD_FILE");
  return s;
}

}  // namespace dtrain::rdzv
