#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/text.hpp"

using namespace dtrain;

TEST_SUITE("common::text") {
  TEST_CASE("edit distance and closest candidate") {
    CHECK(text::edit_distance("kitten", "sitting") == 3);
    CHECK(text::edit_distance("", "abc") == 3);
    std::vector<std::string> keys{"instances", "gpus_per_instance", "procs_per_instance"};
    CHECK(text::closest("instanses", keys) == std::optional<std::string>("instances"));
    CHECK_FALSE(text::closest("zebra", keys).has_value());
  }

  TEST_CASE("fnv1a is the 64-bit FNV-1a of the bytes") {
    CHECK(text::fnv1a("") == 0xcbf29ce484222325ull);
    CHECK(text::fnv1a("a") == 0xaf63dc4c8601ec8cull);
    CHECK(text::fnv1a("foobar") == 0x85944171f73967e8ull);
  }

  TEST_CASE("printable escapes control characters and cuts at the limit") {
    CHECK(text::printable("agent n1") == "agent n1");
    CHECK(text::printable("a\nFAKE: line\x1b[31mred") == "a\\x0aFAKE: line\\x1b[31mred");
    CHECK(text::printable(std::string("\0\x7f", 2)) == "\\x00\\x7f");
    CHECK(text::printable("h\xc3\xa9") == "h\xc3\xa9");  // UTF-8 kept
    CHECK(text::printable("abcdef", 3) == "abc...");
  }

  TEST_CASE("split and join round-trip") {
    auto parts = text::split("a,b,,c", ',');
    REQUIRE(parts.size() == 4);
    CHECK(text::join(parts, ",") == "a,b,,c");
  }
}
