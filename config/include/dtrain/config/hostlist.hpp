#pragma once
// Slurm hostlist syntax: "gpu[01-03,07],login2,x[9-11]" -> gpu01 gpu02 gpu03 gpu07 login2 x9 x10 x11.
// Several groups, ranges and lists, zero padding kept (the width of a range's first number), and
// several bracket groups in one name ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2).
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::config {

// Throws ConfigError naming the offending part when the list is malformed or expands to more
// than a million hosts.
std::vector<std::string> expand_hostlist(std::string_view list);

}  // namespace dtrain::config
