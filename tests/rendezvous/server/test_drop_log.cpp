// The server's rate-limited log of dropped and refused peers, without a clock of its own.
#include <doctest/doctest.h>

#include "drop_log.hpp"

using dtrain::rdzv::DropLog;
using namespace std::chrono_literals;

TEST_SUITE("rendezvous::server::drop_log") {
  TEST_CASE("20 lines a second one by one, the rest summed up once the second is over") {
    DropLog log;
    auto t0 = DropLog::Clock::now();
    int shown = 0;
    for (int i = 0; i < 1000; ++i) shown += log.admit(t0 + std::chrono::microseconds(i), "1.2.3.4:5: junk " + std::to_string(i)) ? 1 : 0;
    CHECK(shown == DropLog::kPerSecond);
    CHECK(log.total() == 1000);
    CHECK_FALSE(log.summary(t0 + 500ms));  // the second is not over
    auto s = log.summary(t0 + 1100ms);
    REQUIRE(s);
    CHECK(s->find("980 more peers dropped or refused in the last 1.1 s") == 0);
    CHECK(s->find("(last: 1.2.3.4:5: junk 999)") != std::string::npos);
    CHECK_FALSE(log.summary(t0 + 3s));  // nothing held back since
    CHECK(log.admit(t0 + 1200ms, "next"));  // a new window shows lines again
  }

  TEST_CASE("a quiet server shows every line") {
    DropLog log;
    auto t = DropLog::Clock::now();
    for (int i = 0; i < 100; ++i) {
      CHECK(log.admit(t, "x"));
      t += 100ms;  // 10 a second
    }
    CHECK_FALSE(log.summary(t));
  }
}
