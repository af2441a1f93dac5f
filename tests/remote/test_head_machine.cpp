// The head's state machine without processes: ends, signals and the patience timer in, actions out.
#include <doctest/doctest.h>

#include <csignal>

#include "head_machine.hpp"

using dtrain::remote::HeadAction;
using dtrain::remote::HeadMachine;

namespace {

bool has(const std::vector<HeadAction>& v, HeadAction::Kind k, int value = -1) {
  for (const auto& a : v)
    if (a.kind == k && (value < 0 || a.value == value)) return true;
  return false;
}

}  // namespace

TEST_SUITE("remote::head_machine") {
  TEST_CASE("every host ends 0: finish 0, the timer armed once") {
    HeadMachine m(3);
    auto a = m.on_end(1, 0, false);
    CHECK(has(a, HeadAction::arm_timer));
    CHECK(m.on_end(0, 0, false).empty());
    a = m.on_end(2, 0, false);
    CHECK(has(a, HeadAction::finish, 0));
    CHECK_FALSE(m.root_status());
  }

  TEST_CASE("the first non-zero end is the root cause, later ones do not change it") {
    HeadMachine m(3);
    m.on_end(2, 0, false);
    m.on_end(1, 3, false);
    CHECK(m.root_host() == 1);
    auto a = m.on_end(0, 69, false);
    CHECK(has(a, HeadAction::finish, 3));
  }

  TEST_CASE("a lost host counts as node lost (69)") {
    HeadMachine m(2);
    m.on_end(1, 255, true);
    CHECK(m.root_status() == 69);
    CHECK(has(m.on_end(0, 143, false), HeadAction::finish, 69));
  }

  TEST_CASE("the hosts that do not end are told SIGTERM, then killed") {
    HeadMachine m(3);
    m.on_end(0, 69, false);
    auto a = m.on_timer();
    CHECK(has(a, HeadAction::send_signal, SIGTERM));
    CHECK(has(a, HeadAction::arm_timer));
    a = m.on_timer();
    CHECK(has(a, HeadAction::kill_agents));
    CHECK(m.on_timer().empty());
    CHECK(m.running(1));
    m.on_end(1, 69, false);
    CHECK(has(m.on_end(2, 0, true), HeadAction::finish, 69));
  }

  TEST_CASE("a host that fails before it joined: the others are told SIGTERM at once, then killed after patience") {
    HeadMachine m(3);
    auto a = m.on_end(1, 255, true, /*joined=*/false);
    CHECK(has(a, HeadAction::send_signal, SIGTERM));
    CHECK(has(a, HeadAction::arm_timer));
    CHECK(m.root_host() == 1);
    CHECK(has(m.on_timer(), HeadAction::kill_agents));
    m.on_end(0, 143, false);
    CHECK(has(m.on_end(2, 143, false), HeadAction::finish, 69));
    // a launch that could not even be started (127) is the root cause with its own status
    HeadMachine n(2);
    CHECK(has(n.on_end(0, 127, false, false), HeadAction::send_signal, SIGTERM));
    CHECK(has(n.on_end(1, 143, false), HeadAction::finish, 127));
  }

  TEST_CASE("a host that ends well before it joined, or fails after it joined: the others get the patience period") {
    HeadMachine m(2);
    auto a = m.on_end(0, 0, false, false);
    CHECK_FALSE(has(a, HeadAction::send_signal));
    CHECK(has(a, HeadAction::arm_timer));
    HeadMachine n(2);
    a = n.on_end(0, 3, false, true);
    CHECK_FALSE(has(a, HeadAction::send_signal));
    CHECK(has(a, HeadAction::arm_timer));
    // told at once after a failure before joining, even while the others had their patience period
    HeadMachine k(3);
    k.on_end(0, 3, false, true);
    CHECK(has(k.on_end(1, 255, true, false), HeadAction::send_signal, SIGTERM));
  }

  TEST_CASE("a signal at the head goes to every host and is the root cause; kill after patience") {
    HeadMachine m(2);
    auto a = m.on_signal(SIGINT);
    CHECK(has(a, HeadAction::send_signal, SIGINT));
    CHECK(has(a, HeadAction::arm_timer));
    CHECK(m.root_status() == 130);
    a = m.on_signal(SIGINT);  // a second Ctrl-C: told again, the timer keeps running
    CHECK(has(a, HeadAction::send_signal, SIGINT));
    CHECK_FALSE(has(a, HeadAction::arm_timer));
    CHECK(has(m.on_timer(), HeadAction::kill_agents));
    m.on_end(0, 130, false);
    CHECK(has(m.on_end(1, 0, true), HeadAction::finish, 130));
  }

  TEST_CASE("a signal after a failure keeps the failure as the root cause") {
    HeadMachine m(2);
    m.on_end(1, 7, false);
    m.on_signal(SIGTERM);
    CHECK(m.root_status() == 7);
  }
}
