#include <doctest/doctest.h>

#include <cerrno>

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
    CHECK(exit_status_of(ResourceError("x")) == exit_code::resource);
    CHECK(exit_code::resource == 71);
  }

  TEST_CASE("a resource errno becomes a ResourceError with a hint, others an IoError") {
    for (int e : {EMFILE, ENFILE, ENOSPC, EDQUOT, ENOMEM, EAGAIN, EADDRINUSE}) {
      CHECK(is_resource_errno(e));
      CHECK(is_resource_errno(-e));  // libuv's negative codes
      CHECK_FALSE(resource_hint(e).empty());
    }
    CHECK_FALSE(is_resource_errno(ENOENT));
    CHECK_THROWS_WITH_AS(throw_os_error(EMFILE, "cannot start rank 3"),
                         doctest::Contains("cannot start rank 3: Too many open files (raise the open-files limit"),
                         ResourceError);
    CHECK_THROWS_WITH_AS(throw_os_error(-ENOSPC, "cannot write plan.json"),
                         doctest::Contains("No space left on device (free space there"), ResourceError);
    try {
      throw_os_error(EACCES, "cannot write x");
    } catch (const ResourceError&) {
      FAIL("EACCES is not a resource");
    } catch (const IoError& e) {
      CHECK(std::string(e.what()) == "cannot write x: Permission denied");
    }
  }
}
