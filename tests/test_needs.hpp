#pragma once
// What a test program's cases may need that a machine can lack (etcd, a GPU). A need is a function
// that returns "" when it is met, else why it is not; a test program registers it by name:
//
//     static const dtrain::test::Need need_etcd("etcd", [] { return std::string(...); });
//
// and ctest asks for it: dtrain_add_test(... NEEDS etcd) runs the program with --need=etcd. When a
// need is not met the program prints "SKIP: <reason>" and exits 77 before any case runs (ctest's
// SKIP_RETURN_CODE 77 reports it skipped); otherwise the cases run, and any failure exits 1, so a
// failure never reads as a skip. The cases themselves still REQUIRE what they need: run by hand
// without --need they fail where it is missing, they never pass by returning early.
#include <string>

namespace dtrain::test {

using NeedCheck = std::string (*)();

struct Need {
  Need(const char* name, NeedCheck check);
};

}  // namespace dtrain::test
