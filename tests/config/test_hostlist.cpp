#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/hostlist.hpp"

using dtrain::config::expand_hostlist;
using V = std::vector<std::string>;

TEST_SUITE("config::hostlist") {
  TEST_CASE("the issue's example: several groups, ranges, lists and padding") {
    CHECK(expand_hostlist("gpu[01-03,07],login2,x[9-11]") ==
          V{"gpu01", "gpu02", "gpu03", "gpu07", "login2", "x9", "x10", "x11"});
  }
  TEST_CASE("plain names and single values") {
    CHECK(expand_hostlist("node1") == V{"node1"});
    CHECK(expand_hostlist("a,b,c") == V{"a", "b", "c"});
    CHECK(expand_hostlist("n[5]") == V{"n5"});
    CHECK(expand_hostlist("n[007]") == V{"n007"});
  }
  TEST_CASE("zero padding follows the first number of a range") {
    CHECK(expand_hostlist("node[08-11]") == V{"node08", "node09", "node10", "node11"});
    CHECK(expand_hostlist("n[098-101]") == V{"n098", "n099", "n100", "n101"});
    CHECK(expand_hostlist("n[8-10]") == V{"n8", "n9", "n10"});
    CHECK(expand_hostlist("n[0-2]") == V{"n0", "n1", "n2"});
  }
  TEST_CASE("suffixes and several bracket groups in one name") {
    CHECK(expand_hostlist("r[1-2]-ib") == V{"r1-ib", "r2-ib"});
    CHECK(expand_hostlist("r[1-2]n[01-02]") == V{"r1n01", "r1n02", "r2n01", "r2n02"});
    CHECK(expand_hostlist("a[1,3],b[2-3].cluster") == V{"a1", "a3", "b2.cluster", "b3.cluster"});
  }
  TEST_CASE("large ranges expand fully and in order") {
    auto v = expand_hostlist("c[0001-1000]");
    REQUIRE(v.size() == 1000);
    CHECK(v.front() == "c0001");
    CHECK(v[99] == "c0100");
    CHECK(v.back() == "c1000");
  }
  TEST_CASE("malformed lists are refused with the reason") {
    auto fails_with = [](const char* list, const char* fragment) {
      try {
        (void)expand_hostlist(list);
      } catch (const dtrain::ConfigError& e) {
        return std::string(e.what()).find(fragment) != std::string::npos;
      }
      return false;
    };
    CHECK(fails_with("", "empty"));
    CHECK(fails_with("n[1-3", "unclosed"));
    CHECK(fails_with("n1-3]", "unmatched"));
    CHECK(fails_with("n[3-1]", "backwards"));
    CHECK(fails_with("n[a-b]", "expected numbers"));
    CHECK(fails_with("n[]", "empty brackets"));
    CHECK(fails_with("a,,b", "empty host name"));
    CHECK(fails_with("n[[1]]", "nested"));
    CHECK(fails_with("a b", "whitespace"));
    CHECK(fails_with("n[0-9999999]", "too large"));
    CHECK(fails_with("a[0-2000]b[0-2000]", "more than a million"));
  }
}
