#pragma once
// Small text helpers shared by the CLI and the spec parser.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::text {

// Edit distance (Levenshtein) between two words.
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` when it is close enough to be a misspelling, else nullopt.
std::optional<std::string> closest(std::string_view word, std::span<const std::string> candidates);
std::vector<std::string> split(std::string_view s, char sep);
std::string join(std::span<const std::string> parts, std::string_view sep);

struct HostPort {
  std::string host;
  int port;
};
// "host:port" or "[v6]:port"; throws ConfigError naming `what` when malformed or the port is out of range.
HostPort parse_host_port(std::string_view s, std::string_view what);

}  // namespace dtrain::text
