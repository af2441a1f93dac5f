// The main of every doctest program: the --need=NAME checks of test_needs.hpp first (a need not met:
// "SKIP: <reason>" and exit 77, no case run), then the cases; 0 when all pass, 1 when any fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "dtrain/common/sanitizer_defaults.hpp"
#include "test_needs.hpp"

namespace {

std::map<std::string, dtrain::test::NeedCheck>& needs() {
  static std::map<std::string, dtrain::test::NeedCheck> all;
  return all;
}

}  // namespace

dtrain::test::Need::Need(const char* name, NeedCheck check) { needs()[name] = check; }

int main(int argc, char** argv) {
  std::vector<char*> args;  // argv without the --need=NAME words, for doctest
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--need=", 7) != 0) {
      args.push_back(argv[i]);
      continue;
    }
    auto it = needs().find(argv[i] + 7);
    if (it == needs().end()) {
      std::fprintf(stderr, "%s: no need named '%s' is registered in this test program (test_needs.hpp)\n", argv[0],
                   argv[i] + 7);
      return 2;
    }
    std::string why = it->second();
    if (!why.empty()) {
      std::printf("SKIP: %s\n", why.c_str());
      return 77;
    }
  }
  doctest::Context context(static_cast<int>(args.size()), args.data());
  int rc = context.run();
  return rc == 0 ? 0 : 1;  // never 77: a failure is not a skip
}
