// The head's state machine (head_machine.hpp).
#include "head_machine.hpp"

#include <csignal>

#include "dtrain/common/exit_codes.hpp"

namespace dtrain::remote {

std::vector<HeadAction> HeadMachine::on_end(int host, int status, bool lost, bool joined) {
  std::vector<HeadAction> out;
  auto i = static_cast<std::size_t>(host);
  if (ended_[i]) return out;
  ended_[i] = true;
  --left_;
  const int code = lost ? exit_code::node_lost : status;
  if (!root_ && code != exit_code::ok) {
    root_ = code;
    root_host_ = host;
  }
  if (left_ == 0) {
    out.push_back({HeadAction::finish, root_.value_or(exit_code::ok)});
    return out;
  }
  if (!joined && code != exit_code::ok && (phase_ == Phase::running || phase_ == Phase::waiting)) {
    phase_ = Phase::told;  // nobody will hear of it through the rendezvous: no time to give
    out.push_back({HeadAction::send_signal, SIGTERM});
    out.push_back({HeadAction::arm_timer});
  } else if (phase_ == Phase::running) {
    phase_ = Phase::waiting;
    out.push_back({HeadAction::arm_timer});
  }
  return out;
}

std::vector<HeadAction> HeadMachine::on_signal(int sig) {
  std::vector<HeadAction> out;
  if (!root_) root_ = exit_code::signal_base + sig;
  out.push_back({HeadAction::send_signal, sig});
  if (phase_ == Phase::running || phase_ == Phase::waiting) {
    phase_ = Phase::told;
    out.push_back({HeadAction::arm_timer});
  }
  return out;
}

std::vector<HeadAction> HeadMachine::on_timer() {
  std::vector<HeadAction> out;
  if (phase_ == Phase::waiting) {
    phase_ = Phase::told;
    out.push_back({HeadAction::send_signal, SIGTERM});
    out.push_back({HeadAction::arm_timer});
  } else if (phase_ == Phase::told) {
    phase_ = Phase::killed;
    out.push_back({HeadAction::kill_agents});
  }
  return out;
}

}  // namespace dtrain::remote
