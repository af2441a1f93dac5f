// The TCP engine's abort record (engine/tcp/failures.hpp): what a failing rank writes is read back
// with its status; anything else (a status out of range, a number with junk after it, a sign, a
// leading zero, no "rank") is no record at all, for the caller to report as a peer error naming
// the bytes, never as a status it happens to start with.
#include <doctest/doctest.h>

#include "engine/tcp/failures.hpp"

using dtrain::coll::tcp::parse_abort_record;

TEST_SUITE("collectives::tcp::abort_record") {
  TEST_CASE("a record abort() writes is read back with its status and text") {
    auto r = parse_abort_record("3 rank 2: allreduce #7 timed out");
    REQUIRE(r.has_value());
    CHECK(r->status == DTRAIN_ERR_TIMEOUT);
    CHECK(r->text == "rank 2: allreduce #7 timed out");
    auto last = parse_abort_record("12 rank 0: x");
    REQUIRE(last.has_value());
    CHECK(last->status == DTRAIN_ERR_INTERNAL);
    CHECK(parse_abort_record("1 rank 0: bad count")->status == DTRAIN_ERR_INVALID_ARGUMENT);
  }

  TEST_CASE("bytes that are no record: no status is taken from them") {
    for (const char* junk : {"999 x", "999 rank 1: x", "13 rank 1: x", "0 rank 1: x", "-4 rank 1: x", "+4 rank 1: x",
                             "04 rank 1: x", "4x rank 1: x", "4  rank 1: x", "4 x", "4", "", " 4 rank 1: x",
                             "1234 rank 1: x", "GET / HTTP/1.1"}) {
      CAPTURE(junk);
      CHECK_FALSE(parse_abort_record(junk).has_value());
    }
  }
}
