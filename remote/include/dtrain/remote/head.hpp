#pragma once
// The head of a launch over several hosts (-H, --hostfile): `dtrain launch` on every host, each
// started through the launch agent (ssh by default; this host's own node directly), node ranks in
// the hosts' order. Each host's output comes back line by line to this process's stdout and stderr
// (tagged by its agent as any node's); a signal here (Ctrl-C) goes to every host; when a host's
// launch ends, the others have a while to end on their own, then are told SIGTERM, then their
// launch agents are killed (head_machine.hpp). Returns the root cause's exit status.
#include <string>
#include <utility>
#include <vector>

namespace dtrain::remote {

struct HeadJob {
  std::vector<std::string> hosts;         // node ranks in this order
  int this_host = -1;                     // the host that is this machine (started directly), -1: none
  std::vector<std::string> launch_agent;  // AGENT... (HOST and the command follow)
  std::string dtrain;                     // the dtrain binary, the same path on every host
  std::vector<std::string> words;         // the launch's words after `launch`
  std::string cwd;
  std::string token;
  std::vector<std::pair<std::string, std::string>> env;  // what travels (head_env)
  double patience_s = 20;                 // how long the others may take to end once one has
};

int run_head(const HeadJob& job);

}  // namespace dtrain::remote
