// -H/--hosts lists and --hostfile files (hosts.hpp).
#include "dtrain/config/hosts.hpp"

#include <charconv>
#include <fstream>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"

namespace dtrain::config {
namespace {

constexpr int kMaxHostSlots = 4096;

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

// "4" -> 4; a ConfigError saying what a slot count is otherwise.
int slot_count(std::string_view text, std::string_view entry) {
  int n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size() || n < 1 || n > kMaxHostSlots)
    throw ConfigError(fmt::format("'{}': '{}' is not a slot count; expected workers on the host from 1 to {}", entry,
                                  text, kMaxHostSlots));
  return n;
}

// "a", "a:4", "[fd00::1]:4".
HostSlots parse_entry(std::string_view entry) {
  HostSlots h;
  std::string_view rest;
  if (!entry.empty() && entry.front() == '[') {
    auto close = entry.find(']');
    if (close == std::string_view::npos) throw ConfigError(fmt::format("'{}': no ']' after the IPv6 address", entry));
    h.name = std::string(entry.substr(1, close - 1));
    rest = entry.substr(close + 1);
    if (!rest.empty() && rest.front() != ':')
      throw ConfigError(fmt::format("'{}': expected [ADDRESS] or [ADDRESS]:N", entry));
    for (char c : h.name)
      if (!(host_char(c) || c == ':' || c == '%'))
        throw ConfigError(fmt::format("'{}': '{}' is not an IPv6 address", entry, h.name));
  } else {
    auto colon = entry.find(':');
    if (colon != entry.rfind(':'))
      throw ConfigError(fmt::format("'{}': write an IPv6 address in brackets, e.g. [fd00::1]:4", entry));
    h.name = std::string(entry.substr(0, colon));
    if (colon != std::string_view::npos) rest = entry.substr(colon);
    for (char c : h.name)
      if (!host_char(c))
        throw ConfigError(fmt::format("'{}': '{}' is not a host name; expected letters, digits, '.', '-' and '_'",
                                      entry, h.name));
  }
  if (h.name.empty()) throw ConfigError(fmt::format("'{}': the host name is empty", entry));
  if (!rest.empty()) h.slots = slot_count(rest.substr(1), entry);
  return h;
}

// A host named twice would run two agents of one node rank: refused.
void refuse_twice(const std::vector<HostSlots>& hosts, const std::string& name) {
  for (const auto& h : hosts)
    if (h.name == name)
      throw ConfigError(fmt::format("host '{}' is named twice; name each host once, with its workers (e.g. {}:8)", name,
                                    name));
}

}  // namespace

std::vector<HostSlots> parse_host_list(std::string_view text) {
  std::vector<HostSlots> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    auto comma = text.find(',', at);
    std::string_view entry = trimmed(text.substr(at, comma == std::string_view::npos ? text.npos : comma - at));
    if (entry.empty())
      throw ConfigError(fmt::format("'{}': an empty entry; expected HOST[:N],... (e.g. a:4,b:4)", text));
    HostSlots h = parse_entry(entry);
    refuse_twice(out, h.name);
    out.push_back(std::move(h));
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in.is_open()) throw ConfigError(fmt::format("{}: cannot read the hostfile: {}", path, errno_text(errno)));
  std::vector<HostSlots> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string where = fmt::format("{}:{}: ", path, number);
    std::string_view text = trimmed(std::string_view(line).substr(0, line.find('#')));
    if (text.empty()) continue;
    try {
      auto space = text.find_first_of(" \t");
      HostSlots h = parse_entry(text.substr(0, space));
      std::string_view rest = space == std::string_view::npos ? std::string_view() : trimmed(text.substr(space));
      while (!rest.empty()) {  // slots=N (mpirun, DeepSpeed); max_slots=N (mpirun: dtrain never runs more)
        auto end = rest.find_first_of(" \t");
        std::string_view word = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : trimmed(rest.substr(end));
        if (word.rfind("slots=", 0) == 0 && !h.slots) h.slots = slot_count(word.substr(6), text);
        else if (word.rfind("slots=", 0) == 0) throw ConfigError(fmt::format("'{}': the slots are given twice", text));
        else if (word.rfind("max_slots=", 0) == 0 || word.rfind("max-slots=", 0) == 0) (void)slot_count(word.substr(10), text);
        else
          throw ConfigError(fmt::format("'{}': '{}' is not slots=N; a line is HOST slots=N, HOST:N or HOST", text, word));
      }
      refuse_twice(out, h.name);
      out.push_back(std::move(h));
    } catch (const ConfigError& e) {
      throw ConfigError(where + e.what());
    }
  }
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read the hostfile: {}", path, errno_text(errno)));
  if (out.empty()) throw ConfigError(fmt::format("{}: names no host; a line is HOST slots=N, HOST:N or HOST", path));
  return out;
}

}  // namespace dtrain::config
