// The join barrier without sockets: admission checks, rank placement, offsets, the rank table.
#include <doctest/doctest.h>

#include <cstdint>

#include "refusal.hpp"
#include "dtrain/rendezvous/membership/join_barrier.hpp"

using namespace dtrain::rdzv;
using rt::refusal_of;
using wire::ErrorCode;

namespace {

JoinRequest req(std::string host, std::int64_t rank, std::int64_t slots, std::int64_t instances = 3,
                std::string hash = "h1") {
  JoinRequest r;
  r.host = std::move(host);
  r.requested = rank;
  r.slots = slots;
  r.instances = instances;
  r.spec_hash = std::move(hash);
  r.master_port = 29500 + int(rank);
  r.heartbeat_timeout_ms = 15000;
  r.timeout_ms = 600000;
  return r;
}

}  // namespace

TEST_SUITE("rendezvous::server::join_barrier") {
  TEST_CASE("JOIN arguments parse in wire order") {
    auto f = wire::Frame(wire::Op::join).str("n0").i64(-1).i64(8).i64(2).str("abc").i64(29500).str("10.0.0.1").i64(15000).i64(600000);
    auto r = JoinRequest::parse(f);
    CHECK(r.host == "n0");
    CHECK(r.requested == -1);
    CHECK(r.slots == 8);
    CHECK(r.instances == 2);
    CHECK(r.spec_hash == "abc");
    CHECK(r.master_port == 29500);
    CHECK(r.addr == "10.0.0.1");
    CHECK(r.heartbeat_timeout_ms == 15000);
    CHECK(r.timeout_ms == 600000);
    CHECK_THROWS_AS(JoinRequest::parse(wire::Frame(wire::Op::join).str("n0")), wire::ProtocolError);
  }

  TEST_CASE("explicit ranks are kept, the others fill the free ranks in join order; offsets are prefix sums") {
    JoinBarrier j;
    j.add(req("a", -1, 2), "10.0.0.1");
    j.add(req("b", 1, 4), "10.0.0.2");
    CHECK_FALSE(j.full());
    CHECK(j.missing_short() == "1 more node(s) (ranks not taken: node 0, node 2)");
    auto r = req("c", -1, 1);
    r.addr = "192.168.1.3";  // advertised: wins over the address seen
    j.add(r, "10.0.0.3");
    REQUIRE(j.full());
    j.close(Clock::now());
    CHECK(j.closed());
    CHECK_FALSE(j.full());
    CHECK(j.world_size() == 7);
    const auto& n = j.nodes();
    CHECK(n[0]->rank == 0);  // a: first free rank
    CHECK(n[1]->rank == 1);  // b: asked for 1
    CHECK(n[2]->rank == 2);  // c: the next free rank
    CHECK(n[0]->offset == 0);
    CHECK(n[1]->offset == 2);
    CHECK(n[2]->offset == 6);
    CHECK(n[2]->addr == "192.168.1.3");
    for (const auto& node : n) CHECK(node->state == "joined");
    CHECK(j.master_addr() == "10.0.0.1");
    CHECK(j.master_port() == 29499);
    auto reply = j.reply_for(*n[1]);
    CHECK(reply.node_rank == 1);
    CHECK(reply.nnodes == 3);
    CHECK(reply.world_size == 7);
    CHECK(reply.rank_offset == 2);
    CHECK(reply.slots == 4);
    CHECK(reply.master_addr == "10.0.0.1");
    // the encoded TABLE reply: one packed entry per node rank
    wire::Decoder dec;
    dec.feed(j.table_frame()->data(), j.table_frame()->size());
    auto table = dec.next();
    REQUIRE(table);
    CHECK(table->op == wire::Op::value);
    REQUIRE(table->args.size() == 3);
    auto e2 = unpack_node_entry(table->args[2]);
    CHECK(e2.node_rank == 2);
    CHECK(e2.host == "c");
    CHECK(e2.rank_offset == 6);
  }

  TEST_CASE("admission refusals name what is wrong") {
    JoinBarrier j;
    auto refused = [&](JoinRequest r) { return refusal_of([&] { j.add(r, "10.0.0.9"); }); };
    SUBCASE("shape out of range") {
      auto r = refused(req("a", 0, 1, 0));
      REQUIRE(r);
      CHECK(r->code == ErrorCode::bad_request);
      CHECK(r->what == "instances 0 out of range 1-65536");
      r = refused(req("a", 0, -1));
      REQUIRE(r);
      CHECK(r->what == "slot count -1 out of range");
      // INT64_MIN once narrowed to int read as node rank 0 but was never placed: close() crashed
      r = refused(req("a", INT64_MIN, 1));
      REQUIRE(r);
      CHECK(r->code == ErrorCode::bad_request);
      CHECK(r->what == "node rank -9223372036854775808 out of range (-1 for any)");
      CHECK(refused(req("a", -2, 1)));
      r = refused(req("a", 3, 1));
      REQUIRE(r);
      CHECK(r->code == ErrorCode::too_many_nodes);
      CHECK(r->what == "host a asks for node rank 3 but the job has 3 nodes (ranks 0-2)");
      CHECK(j.joined() == 0);
    }
    SUBCASE("specs that differ from the first node's") {
      j.add(req("a", 0, 1), "x");
      auto r = refused(req("b", 1, 1, 4));
      REQUIRE(r);
      CHECK(r->code == ErrorCode::spec_mismatch);
      CHECK(r->what.find("host b expects 4 nodes but host a joined expecting 3") != std::string::npos);
      r = refused(req("b", 1, 1, 3, "h2"));
      REQUIRE(r);
      CHECK(r->code == ErrorCode::spec_mismatch);
      CHECK(r->what.find("spec mismatch between node 0 (a) and node 1 (b): spec: 'h1' on node 0 (a), 'h2' on node 1 (b)") !=
            std::string::npos);
      // digests of named fields: what differs, with both values
      JoinBarrier k;
      k.add(req("a", 0, 1, 3, "command=python3 t.py\nprocs_per_instance=1\nbatch=none"), "x");
      r = refusal_of([&] { k.add(req("b", -1, 1, 3, "command=python3 t.py\nprocs_per_instance=2\nbatch=global 8"), "y"); });
      REQUIRE(r);
      CHECK(r->what == "spec mismatch between node 0 (a) and host b: procs_per_instance: '1' on node 0 (a), '2' on "
                       "host b; batch: 'none' on node 0 (a), 'global 8' on host b; every node must run the same job "
                       "(command, cluster shape, batch, parallel layout)");
    }
    SUBCASE("a rank taken twice") {
      j.add(req("a", 1, 1), "x");
      auto r = refused(req("b", 1, 1));
      REQUIRE(r);
      CHECK(r->code == ErrorCode::duplicate_rank);
      CHECK(r->what.find("duplicate node rank 1: host a already joined as node 1, and host b") != std::string::npos);
    }
    SUBCASE("one node too many, before and after the barrier closed") {
      JoinBarrier two;
      two.add(req("a", -1, 1, 2), "x");
      two.add(req("b", -1, 1, 2), "y");
      auto r = refusal_of([&] { two.add(req("c", -1, 1, 2), "z"); });
      REQUIRE(r);
      CHECK(r->what == "too many nodes: the job expects 2 and 2 have joined; host c is one too many");
      two.close(Clock::now());
      r = refusal_of([&] { two.add(req("c", -1, 1, 2), "z"); });
      REQUIRE(r);
      CHECK(r->code == ErrorCode::too_many_nodes);
      CHECK(r->what == "too many nodes: the job expects 2 nodes and all have joined (a, b); host c is one too many");
    }
  }

  TEST_CASE("a joiner that leaves frees its rank; an empty barrier takes a new shape") {
    JoinBarrier j;
    Node& a = j.add(req("a", 0, 1), "x");
    j.add(req("b", -1, 1), "y");
    CHECK(j.missing_text() == "missing: 1 more node(s) (ranks not taken: node 1, node 2) (joined: node 0 on a, b)");
    j.remove(a);
    CHECK(j.joined() == 1);
    CHECK(j.missing_short() == "2 more node(s) (ranks not taken: node 0, node 1, node 2)");
    j.remove(*j.nodes().front());
    CHECK(j.joined() == 0);
    CHECK(j.instances() == 0);
    CHECK(j.missing_text() == "missing:  (joined: none)");
    j.add(req("c", 0, 1, 1, "other"), "z");  // another shape and hash are fine now
    CHECK(j.full());
  }

  TEST_CASE("only fixed ranks: the missing ones are named") {
    JoinBarrier j;
    j.add(req("a", 0, 1), "x");
    CHECK(j.missing_short() == "node 1, node 2");
  }

  TEST_CASE("list_text caps long lists") {
    CHECK(list_text({"a", "b", "c"}, 2) == "a, b, ... (1 more)");
    CHECK(list_text({}) == "");
  }

  TEST_CASE("elastic JOIN arguments are optional; old agents join a fixed job") {
    auto f = wire::Frame(wire::Op::join).str("n0").i64(-1).i64(8).i64(4).str("abc").i64(29500).str("").i64(15000).i64(600000);
    CHECK_FALSE(JoinRequest::parse(f).elastic());
    auto r = JoinRequest::parse(f.i64(2).i64(1500));
    CHECK(r.elastic());
    CHECK(r.min_instances == 2);
    CHECK(r.last_call_ms == 1500);
  }

  TEST_CASE("elastic: closes at max at once, or with min or more after the last call; ranks dense, requested first") {
    auto ereq = [](std::string host, std::int64_t rank) {
      auto r = req(std::move(host), rank, 2, 4);
      r.min_instances = 2;
      r.last_call_ms = 60000;
      return r;
    };
    auto t0 = Clock::now();
    JoinBarrier j;
    j.add(ereq("a", -1), "10.0.0.1");
    CHECK_FALSE(j.ready(t0 + std::chrono::hours(1)));  // below min: never
    CHECK(j.missing_short() == "at least 1 more node(s) of an elastic 2-4");
    j.add(ereq("b", 3), "10.0.0.2");  // a preference, not a slot: 3 of at most 4
    CHECK_FALSE(j.ready(Clock::now()));  // min in, the last call runs
    CHECK(j.missing_short().find("up to 2 more node(s) of an elastic 2-4; last call, closing in ") == 0);
    CHECK(j.ready(Clock::now() + std::chrono::seconds(61)));
    j.add(ereq("c", 3), "10.0.0.3");  // the same preference is not a duplicate in an elastic job
    j.close(Clock::now());
    CHECK(j.instances() == 3);
    CHECK(j.max_instances() == 4);
    CHECK(j.world_size() == 6);
    const auto& n = j.nodes();
    CHECK(n[1]->rank == 0);  // b asked first for 3: it comes first
    CHECK(n[2]->rank == 1);
    CHECK(n[0]->rank == 2);
    CHECK(j.reply_for(*n[0]).rank_offset == 4);
    CHECK(j.reply_for(*n[0]).nnodes == 3);

    JoinBarrier full;
    for (const char* h : {"a", "b", "c", "d"}) full.add(ereq(h, -1), "10.0.0.9");
    CHECK(full.ready(Clock::now()));  // max: no last call
    CHECK(refusal_of([&] { full.add(ereq("e", -1), "10.0.0.9"); })->code == ErrorCode::too_many_nodes);
  }

  TEST_CASE("elastic: a node whose range differs is refused as a spec mismatch; leaving below min stops the last call") {
    auto ereq = [](std::string host, std::int64_t min) {
      auto r = req(std::move(host), -1, 1, 4);
      r.min_instances = min;
      r.last_call_ms = 0;
      return r;
    };
    JoinBarrier j;
    j.add(ereq("a", 2), "10.0.0.1");
    CHECK(refusal_of([&] { j.add(ereq("b", 3), "10.0.0.2"); })->code == ErrorCode::spec_mismatch);
    CHECK(refusal_of([&] { j.add(req("b", -1, 1, 4), "10.0.0.2"); })->code == ErrorCode::spec_mismatch);
    Node& b = j.add(ereq("b", 2), "10.0.0.2");
    CHECK(j.ready(Clock::now()));
    j.remove(b);
    CHECK_FALSE(j.ready(Clock::now() + std::chrono::hours(1)));
  }
}
