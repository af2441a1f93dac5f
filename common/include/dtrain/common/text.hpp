#pragma once
// Small text helpers shared by the CLI and the spec parser.
#include <cstdint>
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

// `s` safe to show on one line of a log or terminal: control characters (newlines, ESC of ANSI
// sequences, DEL) become \xNN, and text past `max` bytes becomes "...". Other bytes are kept.
std::string printable(std::string_view s, std::size_t max = std::string_view::npos);

// 64-bit FNV-1a: a stable hash for ids that must agree across nodes (not for security).
std::uint64_t fnv1a(std::string_view s);

}  // namespace dtrain::text
