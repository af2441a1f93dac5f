#pragma once
// Facts about the machine this process runs on.
#include <cstddef>
#include <string>

namespace dtrain::sys {

// CPUs this process may run on (its affinity mask), at least 1.
int usable_cpus();

// Raises this process's soft limit of open files to its hard limit (servers and agents hold many
// sockets and pipes) and returns the soft limit now in force.
long raise_fd_limit();

}  // namespace dtrain::sys
