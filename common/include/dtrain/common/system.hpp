#pragma once
// Facts about the machine this process runs on.

namespace dtrain::sys {

// CPUs this process may run on (its affinity mask), at least 1.
int usable_cpus();

}  // namespace dtrain::sys
