#include "status.hpp"

#include <utility>

namespace dtrain::coll {
namespace {
thread_local std::string t_last_error;
}

void set_last_error(std::string msg) { t_last_error = std::move(msg); }

void clear_last_error() noexcept {
  if (!t_last_error.empty()) t_last_error.clear();
}

dtrain_status_t fail(dtrain_status_t status, std::string msg) {
  t_last_error = std::move(msg);
  return status;
}

const char* last_error_cstr() { return t_last_error.c_str(); }

}  // namespace dtrain::coll
