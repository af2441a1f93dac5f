// libFuzzer target: the Slurm hostlist expander ("gpu[01-03,07],login2"). A ConfigError is the
// expected refusal; every host it returns must be non-empty and there are at most a million.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/hostlist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return -1;
  std::string_view list(reinterpret_cast<const char*>(data), size);
  try {
    auto hosts = dtrain::config::expand_hostlist(list);
    if (hosts.empty() || hosts.size() > (1u << 20)) std::abort();
    for (const auto& h : hosts)
      if (h.empty()) std::abort();
  } catch (const dtrain::ConfigError&) {
  }
  return 0;
}
