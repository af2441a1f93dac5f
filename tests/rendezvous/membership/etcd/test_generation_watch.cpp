// GenerationWatch against a real etcd: a generation's event keys become job events, its done keys
// mark nodes done, a node key deleted while its node is not done is a lost node, and a watch that
// breaks is the rendezvous lost.
#include <doctest/doctest.h>

#include "../membership_test.hpp"
#include "etcd_server.hpp"
#include "generation_watch.hpp"
#include "wait_until.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;
using dtrain::rdzv::Event;
using dtrain::rdzv::JobEvents;
using membership_test::Events;

namespace {

// A table of two nodes whose node keys end in "a" (node 0 on h0) and "b" (node 1 on h1).
Table two_nodes() {
  Table t;
  for (int i = 0; i < 2; ++i) {
    Table::Row r;
    r.id = i == 0 ? "a" : "b";
    r.entry.node_rank = i;
    r.entry.host = "h" + std::to_string(i);
    t.rows.push_back(r);
  }
  return t;
}

}  // namespace

TEST_SUITE("etcd::generation_watch") {
  TEST_CASE("events, done keys and a lost node of one generation") {
    auto& etcd = etcdtest::shared_etcd();
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    Keys keys("generation-watch");
    for (const char* id : {"a", "b"}) c.put(keys.nodes(0) + id, "{}");
    std::int64_t table_rev = c.put(keys.table(0), "{}");
    JobEvents events;
    Events sink;
    events.set_handler(sink.fn());
    DoneKeys done;
    done.reset({{0, "h0"}, {1, "h1"}});
    GenerationWatch w(c, keys, events, done);
    w.start(two_nodes(), 0, table_rev, 2s);

    Event e;
    e.kind = "failure";
    e.node = 1;
    e.rank = 3;
    std::int64_t rev = c.put(keys.events(0) + "b-1", encode_event(e));
    auto got = sink.wait(30s, "failure");
    REQUIRE(got);
    CHECK(got->seq == rev);
    CHECK(got->rank == 3);

    c.put(keys.done(0) + "0", "1");
    CHECK(rt::wait_until([&] { return done.done(0); }));
    c.erase(keys.nodes(0) + "a");  // node 0 finished: gone, not lost
    c.erase(keys.nodes(0) + "b");
    auto lost = sink.wait(30s, "lost");
    REQUIRE(lost);
    CHECK(lost->node == 1);
    CHECK(lost->host == "h1");
    CHECK(lost->message.find("its lease in etcd ended") != std::string::npos);
    w.stop();
    std::lock_guard lock(sink.mu);
    CHECK(sink.got.size() == 2);  // the failure and node 1's loss; node 0 was not lost
  }

  TEST_CASE("a watch that breaks is the rendezvous lost") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    Keys keys("broken");
    std::int64_t table_rev = c.put(keys.table(0), "{}");
    JobEvents events;
    Events sink;
    events.set_handler(sink.fn());
    DoneKeys done;
    GenerationWatch w(c, keys, events, done);
    w.start(two_nodes(), 0, table_rev, 2s);
    etcd.kill();
    auto lost = sink.wait(30s, "lost");
    REQUIRE(lost);
    CHECK(lost->node == -1);
    CHECK(lost->message.find("the watch of the job's keys broke") != std::string::npos);
  }
}
