#pragma once
// The hosts a command line names, mpirun's way: -H/--hosts "a:4,b:4" (a host with no ":N" takes the
// job's workers per node), and --hostfile FILE with the lines mpirun's and DeepSpeed's hostfiles
// write ("host slots=N"), also "host:N" and a bare "host"; "#" starts a comment. Node ranks follow
// the order; a host named twice is refused. An IPv6 address is written in brackets: "[fd00::1]:4".
// And the command that reaches them (--launch-agent).
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
// The hostfile's text, named `path` in messages.
std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& path);

// The command that reaches the hosts (--launch-agent, mpirun's plm_rsh_agent): "ssh -F cfg" ->
// {"ssh", "-F", "cfg"}, split as a POSIX shell splits words (quotes and backslashes; nothing is
// expanded). Throws ConfigError for an unterminated quote or no word at all.
std::vector<std::string> split_command(std::string_view text);

}  // namespace dtrain::config
