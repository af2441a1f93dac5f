#include "dtrain/common/errors.hpp"

#include <cstring>

#include "dtrain/common/exit_codes.hpp"

namespace dtrain {

void throw_internal(const char* file, int line, const std::string& what) {
  throw InternalError(fmt::format("internal error at {}:{}: {} (please report this)", file, line, what));
}

int exit_status_of(const std::exception& e) {
  if (dynamic_cast<const ConfigError*>(&e) != nullptr) return exit_code::usage;
  if (dynamic_cast<const AuthError*>(&e) != nullptr) return exit_code::auth_refused;
  if (dynamic_cast<const TimeoutError*>(&e) != nullptr) return exit_code::rdzv_timeout;
  return exit_code::internal;
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (may or may not use buf).
  const char* msg = strerror_r(err, buf, sizeof buf);
  return msg;
}

}  // namespace dtrain
