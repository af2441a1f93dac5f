#include <doctest/doctest.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"

using namespace dtrain;

TEST_SUITE("common::errors") {
  TEST_CASE("each error class has its exit status") {
    CHECK(exit_status_of(ConfigError("x")) == exit_code::usage);
    CHECK(exit_status_of(AuthError("x")) == exit_code::auth_refused);
    CHECK(exit_status_of(TimeoutError("x")) == exit_code::rdzv_timeout);
    CHECK(exit_status_of(IoError("x")) == exit_code::internal);
    CHECK(exit_status_of(InternalError("x")) == exit_code::internal);
    CHECK(exit_status_of(std::runtime_error("x")) == exit_code::internal);
  }
}
