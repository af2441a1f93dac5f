#include "dtrain/rendezvous/membership/records.hpp"

#include <fmt/format.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv {
namespace {

using wire::bytes_i64;
using wire::i64_bytes;

Bytes s2b(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A record is one packed list of fields, each a member of its struct: integers as i64, text as its
// bytes, flags as 0/1. Each record's members are listed once (below) and both directions walk that
// list, so packing and unpacking cannot disagree on an index.
Bytes field_bytes(const std::string& v) { return s2b(v); }
Bytes field_bytes(bool v) { return i64_bytes(v ? 1 : 0); }
template <class I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
Bytes field_bytes(I v) { return i64_bytes(v); }

void field_from(const Bytes& b, std::string& v) { v = to_string(b); }
void field_from(const Bytes& b, bool& v) { v = bytes_i64(b) != 0; }
template <class I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
void field_from(const Bytes& b, I& v) { v = static_cast<I>(bytes_i64(b)); }

template <class R, class... M>
void append_fields(std::vector<Bytes>& out, const R& r, const std::tuple<M R::*...>& members) {
  std::apply([&](auto... m) { (out.push_back(field_bytes(r.*m)), ...); }, members);
}

template <class R, class... M>
Bytes pack_record(const R& r, const std::tuple<M R::*...>& members) {
  std::vector<Bytes> out;
  append_fields(out, r, members);
  return wire::pack(out);
}

// Reads sizeof...(M) fields from f[first]; the caller checked that they are there.
template <class R, class... M>
R read_fields(const std::vector<Bytes>& f, std::size_t first, const std::tuple<M R::*...>& members) {
  R r{};
  std::size_t k = first;
  std::apply([&](auto... m) { (field_from(f[k++], r.*m), ...); }, members);
  return r;
}

// The fields of a packed record; ProtocolError when it has fewer than `min`. Later fields are
// ignored, so a newer peer may append some.
std::vector<Bytes> fields_of(ByteView b, std::size_t min, const char* what) {
  std::vector<Bytes> f = wire::unpack(b);
  if (f.size() < min) throw wire::ProtocolError(fmt::format("{} record has {} fields, expected {}", what, f.size(), min));
  return f;
}

template <class R, class... M>
R unpack_record(ByteView b, const std::tuple<M R::*...>& members, const char* what) {
  return read_fields<R>(fields_of(b, sizeof...(M), what), 0, members);
}

const auto kJoinReply = std::make_tuple(&JoinReply::node_rank, &JoinReply::nnodes, &JoinReply::world_size,
                                        &JoinReply::rank_offset, &JoinReply::slots, &JoinReply::master_addr,
                                        &JoinReply::master_port);
const auto kNodeEntry = std::make_tuple(&NodeEntry::node_rank, &NodeEntry::host, &NodeEntry::addr, &NodeEntry::slots,
                                        &NodeEntry::rank_offset);
const auto kEvent = std::make_tuple(&Event::seq, &Event::generation, &Event::kind, &Event::node, &Event::host,
                                    &Event::rank, &Event::exit_code, &Event::signal, &Event::message,
                                    &Event::root_cause);
// A run status: these fields, then one packed NodeStatus per node.
const auto kRunStatus = std::make_tuple(&RunStatus::run_id, &RunStatus::generation, &RunStatus::instances,
                                        &RunStatus::joined, &RunStatus::world_size, &RunStatus::closed,
                                        &RunStatus::master_addr, &RunStatus::master_port, &RunStatus::root_cause);
const auto kNodeStatus = std::make_tuple(&NodeStatus::node_rank, &NodeStatus::host, &NodeStatus::addr,
                                         &NodeStatus::state, &NodeStatus::slots, &NodeStatus::running,
                                         &NodeStatus::exited, &NodeStatus::restarts, &NodeStatus::heartbeat_age_ms);

}  // namespace

bool saw_peer_fail(const Event& e) {
  if (e.kind != "failure" || e.rank < 0 || e.signal != 0) return false;
  return std::string_view(e.message).substr(0, e.message.find('\n')).find(kSawPeerFail) != std::string_view::npos;
}

bool hung_report(const Event& e) {
  if (e.kind != "failure" || e.rank < 0 || e.signal != 0) return false;
  return std::string_view(e.message).substr(0, e.message.find('\n')).find(kHungReport) != std::string_view::npos;
}

std::string describe_event(const Event& e) {
  std::string where = e.host.empty() ? fmt::format("node {}", e.node) : fmt::format("node {} ({})", e.node, e.host);
  if (e.kind == "lost") return fmt::format("{} lost: {}", where, e.message);
  if (e.kind == "stopped") return fmt::format("{} {}", where, e.message.empty() ? "stopped" : e.message);
  std::string how = e.signal != 0 ? fmt::format("was killed by signal {}", e.signal)
                    : hung_report(e) ? std::string("hung")
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

Bytes pack_join_reply(const JoinReply& r) { return pack_record(r, kJoinReply); }
JoinReply unpack_join_reply(ByteView b) { return unpack_record<JoinReply>(b, kJoinReply, "join reply"); }

Bytes pack_node_entry(const NodeEntry& n) { return pack_record(n, kNodeEntry); }
NodeEntry unpack_node_entry(ByteView b) { return unpack_record<NodeEntry>(b, kNodeEntry, "node entry"); }

Bytes pack_event(const Event& e) { return pack_record(e, kEvent); }
Event unpack_event(ByteView b) { return unpack_record<Event>(b, kEvent, "event"); }

Bytes pack_run_status(const RunStatus& s) {
  std::vector<Bytes> f;
  append_fields(f, s, kRunStatus);
  for (const auto& n : s.nodes) f.push_back(pack_record(n, kNodeStatus));
  return wire::pack(f);
}
RunStatus unpack_run_status(ByteView b) {
  constexpr std::size_t head = std::tuple_size_v<decltype(kRunStatus)>;
  std::vector<Bytes> f = fields_of(b, head, "run status");
  RunStatus s = read_fields<RunStatus>(f, 0, kRunStatus);
  for (std::size_t k = head; k < f.size(); ++k) s.nodes.push_back(unpack_record<NodeStatus>(f[k], kNodeStatus, "node status"));
  return s;
}

}  // namespace dtrain::rdzv
