#include "dtrain/common/errors.hpp"

#include <cstring>

namespace dtrain {

void throw_internal(const char* file, int line, const std::string& what) {
  throw InternalError(fmt::format("internal error at {}:{}: {} (please report this)", file, line, what));
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (may or may not use buf).
  const char* msg = strerror_r(err, buf, sizeof buf);
  return msg;
}

}  // namespace dtrain
