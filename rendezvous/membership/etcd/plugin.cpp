// libdtrain_etcd.so's entry points, found with dlsym by rendezvous/store/src/etcd_plugin.cpp. C names,
// C++ objects: the plugin is built from the same sources as the binary that loads it (the version
// must match), and its objects are destroyed through their virtual destructors.
#include <fstream>
#include <sstream>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/membership/etcd_membership.hpp"
#include "etcd_session.hpp"
#include "etcd_store.hpp"

namespace dtrain::etcd {
namespace {

std::string read_password(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw ConfigError(fmt::format("rendezvous.etcd.password_file {}: cannot be read; give the file that holds the "
                                  "etcd user's password", path));
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

std::shared_ptr<Client> client_for(const rdzv::EtcdSettings& s) {
  Options o;
  o.endpoint = (s.tls() ? "https://" : "http://") + s.endpoint;
  o.cacert = s.cacert;
  o.cert = s.cert;
  o.key = s.key;
  o.user = s.user;
  if (!s.user.empty()) o.password = read_password(s.password_file);
  o.connect_timeout = s.timeout;
  o.request_timeout = s.timeout;
  return std::make_shared<Client>(std::move(o));
}

}  // namespace
}  // namespace dtrain::etcd

extern "C" {

[[gnu::visibility("default")]] const char* dtrain_etcd_version() { return DTRAIN_VERSION; }

[[gnu::visibility("default")]] dtrain::rdzv::Membership* dtrain_etcd_membership(const dtrain::rdzv::EtcdSettings* s,
                                                                                const dtrain::rdzv::NodeSessionOptions* o) {
  return new dtrain::etcd::EtcdSession(dtrain::etcd::client_for(*s), *o);
}

[[gnu::visibility("default")]] dtrain::rdzv::Store* dtrain_etcd_store(const dtrain::rdzv::EtcdSettings* s,
                                                                     const char* run_id, int generation) {
  dtrain::etcd::Keys keys(run_id);
  return new dtrain::etcd::EtcdStore(dtrain::etcd::client_for(*s), keys.store(generation));
}
}
