#include "exit_barrier.hpp"

#include <fmt/format.h>

#include "dtrain/rendezvous/store/refused.hpp"

namespace dtrain::rdzv {

bool ExitBarrier::leave(Node& n, const JoinBarrier& join) {
  if (!n.left) {
    n.left = true;
    n.state = "done";
    ++left_;
  }
  for (const auto& other : join.nodes())
    if (other->lost)
      throw Refused(wire::ErrorCode::lost,
                    fmt::format("node {} ({}) was lost before the exit barrier", other->rank, other->host));
  if (left_ != join.instances()) return false;
  finished_ = true;
  return true;
}

std::string ExitBarrier::timeout_text(const JoinBarrier& join, std::int64_t ms) const {
  std::vector<std::string> missing;
  for (const auto& n : join.nodes())
    if (!n->left) missing.push_back(fmt::format("node {} ({})", n->rank, n->host));
  return fmt::format("exit barrier timed out after {:g} s: {} of {} nodes finished; missing: {}", double(ms) / 1000.0,
                     left_, join.instances(), list_text(missing));
}

}  // namespace dtrain::rdzv
