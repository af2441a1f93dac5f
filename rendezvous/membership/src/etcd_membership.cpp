// Opening the etcd backend's membership from its plugin (etcd_membership.hpp).
#include "dtrain/rendezvous/membership/etcd_membership.hpp"

extern "C" {
using dtrain_etcd_membership_fn = dtrain::rdzv::Membership* (*)(const dtrain::rdzv::EtcdSettings*,
                                                                const dtrain::rdzv::NodeSessionOptions*);
}

namespace dtrain::rdzv {

std::unique_ptr<Membership> open_etcd_membership(const EtcdSettings& s, const NodeSessionOptions& opts) {
  auto open = reinterpret_cast<dtrain_etcd_membership_fn>(etcd_plugin_symbol("dtrain_etcd_membership"));
  return std::unique_ptr<Membership>(open(&s, &opts));
}

}  // namespace dtrain::rdzv
