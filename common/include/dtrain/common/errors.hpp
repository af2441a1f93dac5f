#pragma once
// The error split used inside dtrain (exceptions never cross the C ABI of the collectives library):
//   ConfigError  - the user's mistake (spec, flags, environment); the CLI exits 2.
//   IoError      - a peer or the network failed; a job may restart.
//   TimeoutError - a deadline passed (rendezvous join, a collective, a store get).
//   ResourceError- a local resource ran out or is taken (disk full, too many open files, address in
//                  use): an IoError the user fixes on this machine; the CLI exits 71.
//   AuthError    - the rendezvous refused or could not prove the shared token.
//   InternalError- a broken invariant inside dtrain, raised by DTRAIN_CHECK with file:line.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace dtrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ConfigError : public Error {
 public:
  using Error::Error;
};
class IoError : public Error {
 public:
  using Error::Error;
};
class ResourceError : public IoError {
 public:
  using IoError::IoError;
};
class TimeoutError : public Error {
 public:
  using Error::Error;
};
class AuthError : public Error {
 public:
  using Error::Error;
};
class InternalError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_internal(const char* file, int line, const std::string& what);

// The dtrain binary's exit status for an error that ends it (exit_codes.hpp): ConfigError 2,
// ResourceError 71, AuthError 77, TimeoutError 75, anything else 125.
int exit_status_of(const std::exception& e);

// True for an errno (positive, or a negative libuv code) that names a local resource running out
// or taken: EMFILE, ENFILE, ENOSPC, EDQUOT, ENOMEM, EAGAIN, EADDRINUSE.
bool is_resource_errno(int err);
// What to do about such an errno, e.g. "raise the open-files limit (ulimit -n)"; "" for others.
std::string resource_hint(int err);
// ResourceError for is_resource_errno(err) (with the hint), else IoError: "WHAT: ERRNO TEXT".
[[noreturn]] void throw_os_error(int err, const std::string& what);

// errno text for messages: "connect 10.0.0.1:29400: Connection refused"
std::string errno_text(int err);

}  // namespace dtrain

#define DTRAIN_CHECK(cond, ...)                                                       \
  do {                                                                                \
    if (!(cond)) ::dtrain::throw_internal(__FILE__, __LINE__, #cond ": " + fmt::format(__VA_ARGS__)); \
  } while (0)
