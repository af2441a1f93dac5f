#pragma once
// The fate of a launch over several hosts, as the head sees it: a pure state machine (no processes,
// no clock). Inputs: a host's launch ended (with dtrain's own status, or lost: its launch agent
// failed), a signal at the head, the patience timer. Outputs: actions the head carries out.
//
// The root cause is the first of: a signal at the head (128+N), the first host whose launch ended
// with a non-zero status (a lost host counts as 69, node lost). Once a host's launch has ended, the
// others have `patience` seconds to end on their own (they hear of a failure through the
// rendezvous); then they are told SIGTERM; after `patience` more their launch agents are killed.
// A host that ended with a failure before it joined the rendezvous is one the others wait for in
// vain (none of them can hear of it): they are told SIGTERM at once.
#include <optional>
#include <vector>

namespace dtrain::remote {

struct HeadAction {
  enum Kind { send_signal, kill_agents, arm_timer, finish } kind;
  int value = 0;  // send_signal: the signal; finish: the exit status
};

class HeadMachine {
 public:
  explicit HeadMachine(int hosts) : ended_(static_cast<std::size_t>(hosts), false), left_(hosts) {}

  // `joined`: the host's node had joined the rendezvous (its launch said so)
  std::vector<HeadAction> on_end(int host, int status, bool lost, bool joined = true);
  std::vector<HeadAction> on_signal(int sig);
  std::vector<HeadAction> on_timer();

  bool running(int host) const { return !ended_[static_cast<std::size_t>(host)]; }
  // the host whose end is the root cause (-1: a signal at the head, or none yet)
  int root_host() const { return root_host_; }
  std::optional<int> root_status() const { return root_; }

 private:
  enum class Phase { running, waiting, told, killed };
  std::vector<bool> ended_;
  int left_;
  Phase phase_ = Phase::running;
  std::optional<int> root_;
  int root_host_ = -1;
};

}  // namespace dtrain::remote
