#pragma once
// The join barrier as the user sees it: a waiting line while the rendezvous does not answer yet
// ("dtrain: waiting for the rendezvous at 10.0.0.1:29400 (not reachable yet) 12 s / 600 s") or
// nodes are missing ("dtrain: waiting for nodes 2/3 (missing: node 2) 12 s / 600 s"): live on a
// terminal; else a line at once, on each change and every kRepeat; never with --no-progress. And
// the join itself with its errors worded for the launch.
#include <chrono>
#include <optional>
#include <string>

#include "dtrain/rendezvous/membership/node_session.hpp"

namespace dtrain::agent {

class JoinLine {
 public:
  static constexpr std::chrono::seconds kRepeat{5};

  // mode: 0 never (--no-progress), else shown (AgentOptions::progress)
  JoinLine(int mode, int fd);
  void show(const rdzv::JoinProgress& p);
  void clear();

 private:
  int fd_;
  bool tty_, on_, shown_ = false;
  std::string last_;
  std::chrono::milliseconds last_at_{0};  // the waiting time of the last line written
};

// s.join() (rejoin_generation unset) or s.rejoin(g), with the waiting line. A failure to reach or
// hear from the rendezvous (IoError) becomes a TimeoutError that names the endpoint (exit status
// 75); Cancelled, JoinError, AuthError and TimeoutError pass unchanged.
rdzv::JoinResult join_with_line(rdzv::Membership& s, std::optional<int> rejoin_generation, JoinLine& line,
                                const std::string& endpoint);

}  // namespace dtrain::agent
