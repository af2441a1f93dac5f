// What every Membership backend shares (membership.hpp): option checks, the join's waiting line, the
// options of a rejoin.
#include "dtrain/rendezvous/membership/membership.hpp"

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"

namespace dtrain::rdzv {

std::string JoinProgress::line() const {
  if (!reachable)
    return fmt::format("waiting for the rendezvous at {} ({}) {} s / {} s", endpoint,
                       why.find(kDoesNotResolve) != std::string::npos ? why : "not reachable yet",
                       elapsed.count() / 1000, timeout.count() / 1000);
  return fmt::format("waiting for nodes {}/{} (missing: {}) {} s / {} s", joined, instances, missing,
                     elapsed.count() / 1000, timeout.count() / 1000);
}

void check_options(const NodeSessionOptions& o) {
  if (o.instances < 1) throw ConfigError(fmt::format("instances {} must be at least 1", o.instances));
  if (o.min_instances < 0 || o.min_instances > o.instances)
    throw ConfigError(fmt::format("elastic minimum {} nodes is out of range 1-{}", o.min_instances, o.instances));
  if (o.heartbeat_timeout.count() > 0 && o.heartbeat_timeout <= o.heartbeat_interval)
    throw ConfigError(fmt::format("heartbeat timeout ({} ms) must be longer than the heartbeat interval ({} ms)",
                                  o.heartbeat_timeout.count(), o.heartbeat_interval.count()));
}

void prepare_rejoin(NodeSessionOptions& o, const JoinResult& last, int generation) {
  o.store.generation = generation;
  if (last.self.node_rank >= 0) o.node_rank = last.self.node_rank;  // the rank the first join got
}

}  // namespace dtrain::rdzv
