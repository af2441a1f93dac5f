#pragma once
// The etcd backend's key layout and records (JSON values), pure: no etcd calls.
//
// Every key of a run lives under "/dtrain/<run id>/":
//   gen                        the generation that gathers or runs nodes (decimal)
//   g/<G>/node/<lease>         a node's join request, under the node's lease: when the agent dies or
//                              goes silent for heartbeat_timeout, etcd deletes it (the "lost" signal)
//   g/<G>/table                the rank table that closed generation G's join barrier (written once)
//   g/<G>/event/<lease>-<n>    job events (failure, stopped, joined); etcd's revision orders them
//   g/<G>/done/<node rank>     the exit barrier
//   g/<G>/kv/                  the workers' store of generation G (the collectives' bootstrap)
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/rendezvous/membership/records.hpp"
#include "dtrain/rendezvous/membership/join_barrier.hpp"

namespace dtrain::etcd {

struct Keys {
  std::string root;  // "/dtrain/<run id>/"

  explicit Keys(const std::string& run_id) : root("/dtrain/" + run_id + "/") {}
  std::string gen() const { return root + "gen"; }
  std::string generation(std::int64_t g) const { return root + "g/" + std::to_string(g) + "/"; }
  std::string nodes(std::int64_t g) const { return generation(g) + "node/"; }
  std::string node(std::int64_t g, std::int64_t lease) const { return nodes(g) + lease_text(lease); }
  std::string table(std::int64_t g) const { return generation(g) + "table"; }
  std::string events(std::int64_t g) const { return generation(g) + "event/"; }
  std::string done(std::int64_t g) const { return generation(g) + "done/"; }
  std::string store(std::int64_t g) const { return generation(g) + "kv/"; }
  static std::string lease_text(std::int64_t lease);
};

// A rank table as written by the node that closed the barrier.
struct Table {
  struct Row {
    std::string id;  // the node's lease (its node key's last part)
    rdzv::NodeEntry entry;
  };
  std::vector<Row> rows;  // by node rank
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  rdzv::JoinRequest job;  // the first node's request: what a late joiner must match

  const Row* find(const std::string& id) const;
  const Row* by_rank(int node_rank) const;
  rdzv::JoinReply reply_for(const Row& r) const;
  std::vector<rdzv::NodeEntry> entries() const;
};

std::string encode_request(const rdzv::JoinRequest& r);
rdzv::JoinRequest decode_request(const std::string& json);  // throws IoError on a malformed record
// The table of a closed barrier; `ids` maps each node of b to its lease text.
std::string encode_table(const rdzv::JoinBarrier& b, const std::vector<std::pair<const rdzv::Node*, std::string>>& ids,
                         const rdzv::JoinRequest& job);
Table decode_table(const std::string& json);
std::string encode_event(const rdzv::Event& e);
rdzv::Event decode_event(const std::string& json, std::int64_t revision);
std::int64_t parse_generation(const std::string& text);  // throws IoError

// The last part of a key ("g/3/node/ab12" -> "ab12").
std::string last_part(const std::string& key);

}  // namespace dtrain::etcd
