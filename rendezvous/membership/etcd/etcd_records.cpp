// The etcd backend's records (etcd_records.hpp).
#include "etcd_records.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"

namespace dtrain::etcd {

using nlohmann::json;

std::string Keys::lease_text(std::int64_t lease) { return fmt::format("{:016x}", static_cast<std::uint64_t>(lease)); }

std::string last_part(const std::string& key) { return key.substr(key.rfind('/') + 1); }

const Table::Row* Table::find(const std::string& id) const {
  for (const auto& r : rows)
    if (r.id == id) return &r;
  return nullptr;
}

const Table::Row* Table::by_rank(int node_rank) const {
  for (const auto& r : rows)
    if (r.entry.node_rank == node_rank) return &r;
  return nullptr;
}

rdzv::JoinReply Table::reply_for(const Row& r) const {
  return {r.entry.node_rank, int(rows.size()), world_size, r.entry.rank_offset, r.entry.slots, master_addr, master_port};
}

std::vector<rdzv::NodeEntry> Table::entries() const {
  std::vector<rdzv::NodeEntry> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(r.entry);
  return out;
}

namespace {

json request_json(const rdzv::JoinRequest& r) {
  return {{"host", r.host},       {"requested", r.requested},     {"slots", r.slots},
          {"instances", r.instances}, {"spec_hash", r.spec_hash}, {"master_port", r.master_port},
          {"addr", r.addr},       {"min_instances", r.min_instances}, {"last_call_ms", r.last_call_ms},
          {"heartbeat_timeout_ms", r.heartbeat_timeout_ms}};
}

rdzv::JoinRequest request_of(const json& j) {
  rdzv::JoinRequest r;
  r.host = j.at("host").get<std::string>();
  r.requested = j.at("requested").get<std::int64_t>();
  r.slots = j.at("slots").get<std::int64_t>();
  r.instances = j.at("instances").get<std::int64_t>();
  r.spec_hash = j.at("spec_hash").get<std::string>();
  r.master_port = j.at("master_port").get<std::int64_t>();
  r.addr = j.at("addr").get<std::string>();
  r.min_instances = j.at("min_instances").get<std::int64_t>();
  r.last_call_ms = j.at("last_call_ms").get<std::int64_t>();
  r.heartbeat_timeout_ms = j.at("heartbeat_timeout_ms").get<std::int64_t>();
  return r;
}

template <class F>
auto parse_record(const std::string& text, const char* what, F&& f) {
  try {
    return f(json::parse(text));
  } catch (const json::exception& e) {
    throw IoError(fmt::format("etcd: a malformed {} record ({}); was the key written by another program?", what, e.what()));
  }
}

}  // namespace

std::string encode_request(const rdzv::JoinRequest& r) { return request_json(r).dump(); }

rdzv::JoinRequest decode_request(const std::string& text) {
  return parse_record(text, "join request", [](const json& j) { return request_of(j); });
}

std::string encode_table(const rdzv::JoinBarrier& b, const std::vector<std::pair<const rdzv::Node*, std::string>>& ids,
                         const rdzv::JoinRequest& job) {
  json rows = json::array();
  for (const auto& [n, id] : ids)
    rows.push_back({{"id", id}, {"rank", n->rank}, {"host", n->host}, {"addr", n->addr}, {"slots", n->slots},
                    {"offset", n->offset}});
  std::sort(rows.begin(), rows.end(), [](const json& a, const json& c) { return a["rank"] < c["rank"]; });
  return json{{"rows", rows},
              {"world_size", b.world_size()},
              {"master_addr", b.master_addr()},
              {"master_port", b.master_port()},
              {"job", request_json(job)}}
      .dump();
}

Table decode_table(const std::string& text) {
  return parse_record(text, "rank table", [](const json& j) {
    Table t;
    for (const auto& r : j.at("rows"))
      t.rows.push_back({r.at("id").get<std::string>(),
                        {r.at("rank").get<int>(), r.at("host").get<std::string>(), r.at("addr").get<std::string>(),
                         r.at("slots").get<int>(), r.at("offset").get<int>()}});
    t.world_size = j.at("world_size").get<int>();
    t.master_addr = j.at("master_addr").get<std::string>();
    t.master_port = j.at("master_port").get<int>();
    t.job = request_of(j.at("job"));
    return t;
  });
}

std::string encode_event(const rdzv::Event& e) {
  return json{{"kind", e.kind},         {"node", e.node},     {"host", e.host},       {"rank", e.rank},
              {"exit_code", e.exit_code}, {"signal", e.signal}, {"message", e.message}, {"generation", e.generation}}
      .dump();
}

rdzv::Event decode_event(const std::string& text, std::int64_t revision) {
  return parse_record(text, "job event", [&](const json& j) {
    rdzv::Event e;
    e.seq = revision;
    e.kind = j.at("kind").get<std::string>();
    e.node = j.at("node").get<int>();
    e.host = j.at("host").get<std::string>();
    e.rank = j.at("rank").get<int>();
    e.exit_code = j.at("exit_code").get<int>();
    e.signal = j.at("signal").get<int>();
    e.message = j.at("message").get<std::string>();
    e.generation = j.at("generation").get<std::int64_t>();
    return e;
  });
}

std::int64_t parse_generation(const std::string& text) {
  std::int64_t g = -1;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), g);
  if (ec != std::errc() || p != text.data() + text.size() || g < 0)
    throw IoError(fmt::format("etcd: the run's generation key holds '{}', not a generation number", text.substr(0, 40)));
  return g;
}

}  // namespace dtrain::etcd
