#pragma once
// Names of the collectives' shared-memory segments (/dev/shm) and their removal. `dtrain launch`
// gives its workers DTRAIN_SHM_PREFIX, a stem unique to the agent ("dtrain-<agent id>-"); the
// shared-memory engine puts it in front of every segment name, and the agent (at the end of each
// generation and at exit) and its guardian (when the agent dies) remove every /dev/shm entry that
// starts with it, so a worker killed during setup leaves nothing behind.
#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain::shm_names {

inline constexpr std::size_t kMaxPrefix = 64;

// DTRAIN_SHM_PREFIX, checked: "" when unset or empty. Throws ConfigError when it holds anything
// but letters, digits, '-', '_' and '.', or more than kMaxPrefix characters.
std::string env_prefix();
// True when `prefix` is a usable stem (non-empty, the characters above, at most kMaxPrefix).
bool valid_prefix(std::string_view prefix);
// Removes every /dev/shm entry whose name starts with `prefix` (nothing for an invalid one);
// returns how many went.
std::size_t sweep(std::string_view prefix);

}  // namespace dtrain::shm_names
