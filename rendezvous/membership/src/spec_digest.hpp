#pragma once
// What two nodes' spec digests (the join's spec_hash argument: "name=value" lines, see
// agent/src/node_config.cpp) disagree on, for the refusal every joiner of the barrier gets:
//   "procs_per_instance: 1 on node 0 (a), 2 on host b; command: ..."
// Digests that are not name=value lines (an opaque hash) compare as one field named "spec".
#include <string>

namespace dtrain::rdzv {

std::string spec_difference(const std::string& first, const std::string& first_who, const std::string& other,
                            const std::string& other_who);

}  // namespace dtrain::rdzv
