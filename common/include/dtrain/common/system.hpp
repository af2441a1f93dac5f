#pragma once
// Facts about the machine this process runs on.
#include <cstddef>
#include <string>

namespace dtrain::sys {

// CPUs this process may run on (its affinity mask), at least 1.
int usable_cpus();

// `bytes` random bytes from the kernel (getrandom) as hex text, e.g. a fresh token. Throws IoError.
std::string random_hex(std::size_t bytes);

}  // namespace dtrain::sys
