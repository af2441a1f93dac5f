#include "dtrain/common/shm_names.hpp"

#include <dirent.h>
#include <sys/mman.h>

#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"

namespace dtrain::shm_names {

bool valid_prefix(std::string_view prefix) {
  if (prefix.empty() || prefix.size() > kMaxPrefix) return false;
  for (char c : prefix)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

std::string env_prefix() {
  const char* v = std::getenv("DTRAIN_SHM_PREFIX");
  if (v == nullptr || *v == '\0') return "";
  if (!valid_prefix(v))
    throw ConfigError(fmt::format("DTRAIN_SHM_PREFIX='{}': expected at most {} letters, digits, '-', '_' or '.' "
                                  "(dtrain launch sets it for its workers; unset it to use the default names)",
                                  v, kMaxPrefix));
  return v;
}

std::size_t sweep(std::string_view prefix) {
  if (!valid_prefix(prefix)) return 0;
  std::size_t n = 0;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name.substr(0, prefix.size()) == prefix && ::shm_unlink(fmt::format("/{}", name).c_str()) == 0) ++n;
  }
  ::closedir(d);
  return n;
}

}  // namespace dtrain::shm_names
