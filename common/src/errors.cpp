#include "dtrain/common/errors.hpp"

#include <cerrno>
#include <cstring>

#include "dtrain/common/exit_codes.hpp"

namespace dtrain {

void throw_internal(const char* file, int line, const std::string& what) {
  throw InternalError(fmt::format("internal error at {}:{}: {} (please report this)", file, line, what));
}

int exit_status_of(const std::exception& e) {
  if (dynamic_cast<const ConfigError*>(&e) != nullptr) return exit_code::usage;
  if (dynamic_cast<const AuthError*>(&e) != nullptr) return exit_code::auth_refused;
  if (dynamic_cast<const ResourceError*>(&e) != nullptr) return exit_code::resource;
  if (dynamic_cast<const TimeoutError*>(&e) != nullptr) return exit_code::rdzv_timeout;
  return exit_code::internal;
}

bool is_resource_errno(int err) {
  if (err < 0) err = -err;
  return err == EMFILE || err == ENFILE || err == ENOSPC || err == EDQUOT || err == ENOMEM || err == EAGAIN ||
         err == EADDRINUSE;
}

std::string resource_hint(int err) {
  if (err < 0) err = -err;
  switch (err) {
    case EMFILE: return "raise the open-files limit (ulimit -n) or run fewer workers on this node";
    case ENFILE: return "the whole system is out of file handles (fs.file-max); close other programs";
    case ENOSPC:
    case EDQUOT: return "free space there or choose another directory (output.log_dir, --log-dir, TMPDIR)";
    case ENOMEM: return "the machine is out of memory";
    case EAGAIN: return "a process or thread limit was reached (ulimit -u)";
    case EADDRINUSE: return "another process uses that address; pick another port, or 0 for a free one";
    default: return "";
  }
}

void throw_os_error(int err, const std::string& what) {
  int e = err < 0 ? -err : err;
  std::string text = fmt::format("{}: {}", what, errno_text(e));
  if (!is_resource_errno(e)) throw IoError(text);
  std::string hint = resource_hint(e);
  throw ResourceError(hint.empty() ? text : fmt::format("{} ({})", text, hint));
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (may or may not use buf).
  const char* msg = strerror_r(err, buf, sizeof buf);
  return msg;
}

}  // namespace dtrain
