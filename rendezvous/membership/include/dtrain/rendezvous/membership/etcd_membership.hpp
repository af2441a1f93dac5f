#pragma once
// The membership of a node through the etcd rendezvous backend, opened from its plugin
// (libdtrain_etcd.so, loaded on first use: store/etcd_plugin.hpp, where EtcdSettings is).
//
// Errors: ConfigError when the plugin cannot be loaded or a TLS or password file cannot be read;
// otherwise what the backend throws (membership.hpp).
#include <memory>

#include "dtrain/rendezvous/membership/membership.hpp"
#include "dtrain/rendezvous/store/etcd_plugin.hpp"

namespace dtrain::rdzv {

// opts.store names the run id and the first generation.
std::unique_ptr<Membership> open_etcd_membership(const EtcdSettings& s, const NodeSessionOptions& opts);

}  // namespace dtrain::rdzv
