// The records the rendezvous exchanges (records.hpp): every field survives a round trip, a record
// with fields missing is refused, and one with fields appended by a newer peer is read.
#include <doctest/doctest.h>

#include "dtrain/rendezvous/membership/records.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

using namespace dtrain::rdzv;

TEST_CASE("records: every field of every record survives a round trip") {
  JoinReply j{3, 4, 32, 24, 8, "10.0.0.1", 29500};
  JoinReply j2 = unpack_join_reply(pack_join_reply(j));
  CHECK(j2.node_rank == 3);
  CHECK(j2.nnodes == 4);
  CHECK(j2.world_size == 32);
  CHECK(j2.rank_offset == 24);
  CHECK(j2.slots == 8);
  CHECK(j2.master_addr == "10.0.0.1");
  CHECK(j2.master_port == 29500);

  NodeEntry n2 = unpack_node_entry(pack_node_entry(NodeEntry{2, "h2", "10.0.0.2", 4, 8}));
  CHECK(n2.node_rank == 2);
  CHECK(n2.host == "h2");
  CHECK(n2.addr == "10.0.0.2");
  CHECK(n2.slots == 4);
  CHECK(n2.rank_offset == 8);

  Event e;
  e.seq = 1LL << 40;
  e.generation = 7;
  e.kind = "failure";
  e.node = 1;
  e.host = "h1";
  e.rank = 5;
  e.exit_code = 3;
  e.signal = 9;
  e.message = std::string("line one\nline two\0with a NUL", 29);
  e.root_cause = true;
  Event e2 = unpack_event(pack_event(e));
  CHECK(e2.seq == e.seq);
  CHECK(e2.generation == 7);
  CHECK(e2.kind == "failure");
  CHECK(e2.node == 1);
  CHECK(e2.host == "h1");
  CHECK(e2.rank == 5);
  CHECK(e2.exit_code == 3);
  CHECK(e2.signal == 9);
  CHECK(e2.message == e.message);
  CHECK(e2.root_cause);
  CHECK_FALSE(unpack_event(pack_event(Event{})).root_cause);

  RunStatus s;
  s.run_id = "job";
  s.generation = 2;
  s.instances = 3;
  s.joined = 2;
  s.world_size = 6;
  s.closed = true;
  s.master_addr = "h0";
  s.master_port = 1234;
  s.root_cause = "node 1: rank 3 exited with code 1";
  s.nodes.push_back(NodeStatus{0, "h0", "10.0.0.1", "running", 2, 2, 0, 1, 150});
  s.nodes.push_back(NodeStatus{1, "h1", "10.0.0.2", "lost", 2, 0, 2, 1, 90000});
  RunStatus s2 = unpack_run_status(pack_run_status(s));
  CHECK(s2.run_id == "job");
  CHECK(s2.generation == 2);
  CHECK(s2.instances == 3);
  CHECK(s2.joined == 2);
  CHECK(s2.world_size == 6);
  CHECK(s2.closed);
  CHECK(s2.master_addr == "h0");
  CHECK(s2.master_port == 1234);
  CHECK(s2.root_cause == s.root_cause);
  REQUIRE(s2.nodes.size() == 2);
  CHECK(s2.nodes[1].node_rank == 1);
  CHECK(s2.nodes[1].host == "h1");
  CHECK(s2.nodes[1].addr == "10.0.0.2");
  CHECK(s2.nodes[1].state == "lost");
  CHECK(s2.nodes[1].slots == 2);
  CHECK(s2.nodes[1].running == 0);
  CHECK(s2.nodes[1].exited == 2);
  CHECK(s2.nodes[1].restarts == 1);
  CHECK(s2.nodes[1].heartbeat_age_ms == 90000);
  CHECK(unpack_run_status(pack_run_status(RunStatus{})).nodes.empty());
}

TEST_CASE("records: a record with fields missing is refused, one with fields appended is read") {
  std::vector<Bytes> f = wire::unpack(pack_node_entry(NodeEntry{2, "h2", "a", 4, 8}));
  std::vector<Bytes> shorter(f.begin(), f.end() - 1);
  CHECK_THROWS_AS(unpack_node_entry(wire::pack(shorter)), wire::ProtocolError);
  std::vector<Bytes> longer = f;
  longer.push_back(wire::i64_bytes(99));
  CHECK(unpack_node_entry(wire::pack(longer)).rank_offset == 8);
  CHECK_THROWS_AS(unpack_event(wire::pack({})), wire::ProtocolError);
}
