// libFuzzer target: the hosts of a command line (config/src/hosts.cpp): the input as an -H list, as
// a hostfile and as a --launch-agent command. A ConfigError is the expected refusal; what is
// returned must hold what the plan relies on: non-empty names, each named once, slots from 1 to
// 4096, at least one host; at least one word of a command.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/hosts.hpp"

namespace {

void check(const std::vector<dtrain::config::HostSlots>& hosts) {
  if (hosts.empty()) std::abort();
  std::set<std::string> names;
  for (const auto& h : hosts) {
    if (h.name.empty() || !names.insert(h.name).second) std::abort();
    if (h.slots && (*h.slots < 1 || *h.slots > 4096)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 8192) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    check(dtrain::config::parse_host_list(text));
  } catch (const dtrain::ConfigError&) {
  }
  try {
    check(dtrain::config::parse_hostfile(text, "fuzz"));
  } catch (const dtrain::ConfigError&) {
  }
  try {
    if (dtrain::config::split_command(text).empty()) std::abort();
  } catch (const dtrain::ConfigError&) {
  }
  return 0;
}
