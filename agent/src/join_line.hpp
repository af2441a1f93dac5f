#pragma once
// The join barrier as the user sees it: a waiting line while nodes are missing ("dtrain: waiting for
// nodes 2/3 (missing: node 2) 12 s / 600 s"), live on a terminal, else one line per change when
// progress is forced on; and the join itself with its errors worded for the launch.
#include <optional>
#include <string>

#include "dtrain/rendezvous/node_session.hpp"

namespace dtrain::agent {

class JoinLine {
 public:
  // mode: 1 always, 0 never, -1 when fd is a terminal (AgentOptions::progress)
  JoinLine(int mode, int fd);
  void show(const rdzv::JoinProgress& p);
  void clear();

 private:
  int fd_;
  bool tty_, on_, shown_ = false;
  std::string last_;
};

// s.join() (rejoin_generation unset) or s.rejoin(g), with the waiting line. A failure to reach or
// hear from the rendezvous (IoError) becomes a TimeoutError that names the endpoint (exit status
// 75); Cancelled, JoinError, AuthError and TimeoutError pass unchanged.
rdzv::JoinResult join_with_line(rdzv::NodeSession& s, std::optional<int> rejoin_generation, JoinLine& line,
                                const std::string& endpoint);

}  // namespace dtrain::agent
