#pragma once
// What goes in front of a worker's line on the terminal: its tag and its timestamp.
#include <chrono>
#include <string>
#include <string_view>

namespace dtrain::agent {

// Expands {node} {rank} {local_rank} {stream} in a tag format; other text is kept as is, "{{" and
// "}}" are literal braces. Throws ConfigError naming an unknown field.
std::string format_tag(std::string_view format, int node, int rank, int local_rank,
                       std::string_view stream);
// "2026-12-02T14:02:23.123 " (local time, milliseconds).
std::string timestamp_prefix(std::chrono::system_clock::time_point t);

}  // namespace dtrain::agent
