#pragma once
// Writing text to a descriptor whole (the terminal, a log, the summary, plan.json).
#include <string_view>

namespace dtrain::agent {

// Writes all of `data` to fd, waiting (poll) when it is non-blocking and full. Returns false on error.
bool write_all(int fd, std::string_view data);

}  // namespace dtrain::agent
