#include "dtrain/rendezvous/records.hpp"

#include <fmt/format.h>

#include <utility>

#include "dtrain/rendezvous/wire.hpp"

namespace dtrain::rdzv {
namespace {

using wire::bytes_i64;
using wire::i64_bytes;

Bytes s2b(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct Reader {
  std::vector<Bytes> f;
  std::size_t min;
  Reader(ByteView b, std::size_t min_fields, const char* what) : f(wire::unpack(b)), min(min_fields) {
    if (f.size() < min) throw wire::ProtocolError(fmt::format("{} record has {} fields, expected {}", what, f.size(), min));
  }
  std::int64_t i(std::size_t k) const { return bytes_i64(f[k]); }
  int i32(std::size_t k) const { return int(bytes_i64(f[k])); }
  std::string s(std::size_t k) const { return to_string(f[k]); }
};

}  // namespace

bool saw_peer_fail(const Event& e) {
  if (e.kind != "failure" || e.rank < 0 || e.signal != 0) return false;
  return std::string_view(e.message).substr(0, e.message.find('\n')).find(kSawPeerFail) != std::string_view::npos;
}

std::string describe_event(const Event& e) {
  std::string where = e.host.empty() ? fmt::format("node {}", e.node) : fmt::format("node {} ({})", e.node, e.host);
  if (e.kind == "lost") return fmt::format("{} lost: {}", where, e.message);
  if (e.kind == "stopped") return fmt::format("{} {}", where, e.message.empty() ? "stopped" : e.message);
  std::string how = e.signal != 0 ? fmt::format("was killed by signal {}", e.signal)
                                  : fmt::format("exited with code {}", e.exit_code);
  std::string who = e.rank >= 0 ? fmt::format("rank {} {}", e.rank, how) : how;
  return e.message.empty() ? fmt::format("{}: {}", where, who) : fmt::format("{}: {}: {}", where, who, e.message);
}

Event rendezvous_lost(std::string where, std::string message) {
  Event e;
  e.kind = "lost";
  e.node = -1;
  e.host = std::move(where);
  e.message = std::move(message);
  return e;
}

Bytes pack_join_reply(const JoinReply& r) {
  return wire::pack({i64_bytes(r.node_rank), i64_bytes(r.nnodes), i64_bytes(r.world_size), i64_bytes(r.rank_offset),
                     i64_bytes(r.slots), s2b(r.master_addr), i64_bytes(r.master_port)});
}
JoinReply unpack_join_reply(ByteView b) {
  Reader r(b, 7, "join reply");
  return {r.i32(0), r.i32(1), r.i32(2), r.i32(3), r.i32(4), r.s(5), r.i32(6)};
}

Bytes pack_node_entry(const NodeEntry& n) {
  return wire::pack({i64_bytes(n.node_rank), s2b(n.host), s2b(n.addr), i64_bytes(n.slots), i64_bytes(n.rank_offset)});
}
NodeEntry unpack_node_entry(ByteView b) {
  Reader r(b, 5, "node entry");
  return {r.i32(0), r.s(1), r.s(2), r.i32(3), r.i32(4)};
}

Bytes pack_event(const Event& e) {
  return wire::pack({i64_bytes(e.seq), i64_bytes(e.generation), s2b(e.kind), i64_bytes(e.node), s2b(e.host),
                     i64_bytes(e.rank), i64_bytes(e.exit_code), i64_bytes(e.signal), s2b(e.message),
                     i64_bytes(e.root_cause ? 1 : 0)});
}
Event unpack_event(ByteView b) {
  Reader r(b, 10, "event");
  Event e;
  e.seq = r.i(0);
  e.generation = r.i(1);
  e.kind = r.s(2);
  e.node = r.i32(3);
  e.host = r.s(4);
  e.rank = r.i32(5);
  e.exit_code = r.i32(6);
  e.signal = r.i32(7);
  e.message = r.s(8);
  e.root_cause = r.i(9) != 0;
  return e;
}

Bytes pack_run_status(const RunStatus& s) {
  std::vector<Bytes> f{s2b(s.run_id), i64_bytes(s.generation), i64_bytes(s.instances), i64_bytes(s.joined),
                       i64_bytes(s.world_size), i64_bytes(s.closed ? 1 : 0), s2b(s.master_addr),
                       i64_bytes(s.master_port), s2b(s.root_cause)};
  for (const auto& n : s.nodes)
    f.push_back(wire::pack({i64_bytes(n.node_rank), s2b(n.host), s2b(n.addr), s2b(n.state), i64_bytes(n.slots),
                            i64_bytes(n.running), i64_bytes(n.exited), i64_bytes(n.restarts),
                            i64_bytes(n.heartbeat_age_ms)}));
  return wire::pack(f);
}
RunStatus unpack_run_status(ByteView b) {
  Reader r(b, 9, "run status");
  RunStatus s;
  s.run_id = r.s(0);
  s.generation = r.i(1);
  s.instances = r.i32(2);
  s.joined = r.i32(3);
  s.world_size = r.i32(4);
  s.closed = r.i(5) != 0;
  s.master_addr = r.s(6);
  s.master_port = r.i32(7);
  s.root_cause = r.s(8);
  for (std::size_t k = 9; k < r.f.size(); ++k) {
    Reader n(r.f[k], 9, "node status");
    NodeStatus ns;
    ns.node_rank = n.i32(0);
    ns.host = n.s(1);
    ns.addr = n.s(2);
    ns.state = n.s(3);
    ns.slots = n.i32(4);
    ns.running = n.i(5);
    ns.exited = n.i(6);
    ns.restarts = n.i(7);
    ns.heartbeat_age_ms = n.i(8);
    s.nodes.push_back(ns);
  }
  return s;
}

}  // namespace dtrain::rdzv
