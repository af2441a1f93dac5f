// Scopes without sockets: which (run id, generation) scopes are freed when, and their budgets.
#include <doctest/doctest.h>

#include "refusal.hpp"
#include "scope.hpp"

using namespace dtrain::rdzv;
using namespace dtrain::rdzv::srv;
using rt::refusal_of;

namespace {

Bytes b(std::string_view s) { return Bytes(s.begin(), s.end()); }

// A JOIN as it arrives: host, any rank, 1 slot, `instances` nodes.
JoinRequest join_of(const char* host, int instances) {
  return JoinRequest::parse(
      wire::Frame(wire::Op::join).str(host).i64(-1).i64(1).i64(instances).str("h").i64(0).str("").i64(1000).i64(1000));
}

}  // namespace

TEST_SUITE("rendezvous::server::scope") {
  TEST_CASE("a scope whose job ran is freed once no connection uses it; the same job can run again") {
    Scopes scopes({100, 1000}, {1000, 10000});
    Scope& s = scopes.open("job", 0);
    s.conns = 2;
    s.join.add(join_of("n0", 2), "10.0.0.1");
    s.join.add(join_of("n1", 2), "10.0.0.2");
    s.join.close(Clock::now());
    s.kv.set("nccl", b("id"));
    s.conns = 1;
    scopes.collect("job");
    CHECK(scopes.size() == 1);  // still used
    s.conns = 0;
    CHECK(s.disposable());
    scopes.collect("job");
    CHECK(scopes.size() == 0);
    CHECK(scopes.total().keys() == 0);
    CHECK(scopes.runs_with_nodes().empty());
    Scope& again = scopes.open("job", 0);
    CHECK(again.join.joined() == 0);
    CHECK(again.kv.size() == 0);
  }

  TEST_CASE("a plain store's keys stay when its clients leave; an empty scope goes") {
    Scopes scopes({100, 1000}, {1000, 10000});
    Scope& kept = scopes.open("store", 0);
    kept.kv.set("k", b("v"));
    scopes.collect("store");
    CHECK(scopes.size() == 1);
    CHECK_FALSE(kept.disposable());
    scopes.open("idle", 0);
    scopes.collect("idle");
    CHECK(scopes.size() == 1);
  }

  TEST_CASE("older generations go once unused; a run's budget spans its generations") {
    Scopes scopes({3, 1000}, {1000, 10000});
    Scope& g0 = scopes.open("job", 0);
    g0.conns = 1;
    g0.kv.set("a", b("1"));
    g0.kv.set("b", b("1"));
    Scope& g1 = scopes.open("job", 1);
    g1.kv.set("c", b("1"));
    auto full = refusal_of([&] { g1.kv.set("d", b("1")); });
    REQUIRE(full);
    CHECK(full->what == "run 'job' (all generations) holds 3 keys, the limit");
    g0.conns = 0;
    scopes.collect("job");  // generation 0 is older and unused: freed, its keys given back
    CHECK(scopes.size() == 1);
    g1.kv.set("d", b("1"));
    CHECK(scopes.total().keys() == 2);
  }

  TEST_CASE("failure reports are charged to the run and capped per scope") {
    Scopes scopes({100, 5000}, {1000, 10000});
    Scope& s = scopes.open("job", 0);
    s.charge_event(4000);
    CHECK(scopes.total().bytes() == 4000);
    auto over = refusal_of([&] { s.charge_event(2000); });
    REQUIRE(over);
    CHECK(over->what.find("run 'job' (all generations) would hold 6000 bytes") == 0);
    for (std::size_t i = 0; i < kMaxEventsPerScope; ++i) s.events.append(EventKind::failure, Event{});
    auto many = refusal_of([&] { s.charge_event(1); });
    REQUIRE(many);
    CHECK(many->what == "run 'job' generation 0 holds 10000 events, the limit");
    scopes.clear();
    CHECK(scopes.total().bytes() == 0);
  }
}
