#pragma once
// The hosts a command line names, mpirun's way: -H/--hosts "a:4,b:4" (a host with no ":N" takes the
// job's workers per node), and --hostfile FILE with the lines mpirun's and DeepSpeed's hostfiles
// write ("host slots=N"), also "host:N" and a bare "host"; "#" starts a comment. Node ranks follow
// the order; a host named twice is refused. An IPv6 address is written in brackets: "[fd00::1]:4".
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::config {

struct HostSlots {
  std::string name;          // as ssh and the rendezvous reach it (an IPv6 address without brackets)
  std::optional<int> slots;  // workers on it; unset: the job's workers per node
};

// Throws ConfigError naming the entry at fault.
std::vector<HostSlots> parse_host_list(std::string_view text);
// Throws ConfigError naming FILE:LINE (or the file, when it cannot be read).
std::vector<HostSlots> read_hostfile(const std::string& path);

}  // namespace dtrain::config
