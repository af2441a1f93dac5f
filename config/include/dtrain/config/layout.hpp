#pragma once
// The parallel layout of a job (dtrain-job(5), `parallel`): how the world's ranks split into
// pipeline stages, tensor shards and data-parallel replicas, as Megatron-LM lays them out. A rank's
// coordinates are its digits in a mixed radix whose order (fastest first) is `order`, e.g.
// "tp-dp-pp": rank = tp + T x (dp + D x pp). A group of one kind holds the ranks that share the
// other two coordinates; its members are listed by that kind's coordinate.
#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::config {

enum class GroupKind { tensor = 0, pipeline = 1, data = 2 };

// "tensor", "pipeline", "data"; and the short names of `order`: "tp", "pp", "dp".
const char* group_kind_name(GroupKind kind);
const char* group_kind_short(GroupKind kind);

struct Coords {
  int tp = 0;
  int pp = 0;
  int dp = 0;
  int of(GroupKind kind) const;
};

struct Layout {
  int tensor = 1;
  int pipeline = 1;
  int data = 1;
  std::array<GroupKind, 3> order{GroupKind::tensor, GroupKind::data, GroupKind::pipeline};  // fastest first

  int world() const { return tensor * pipeline * data; }
  int size(GroupKind kind) const;
  // True when every rank is a replica of the whole model (pipeline = tensor = 1).
  bool data_only() const { return tensor == 1 && pipeline == 1; }
  Coords coords(int rank) const;
  int rank_of(const Coords& c) const;
  // The ranks of `kind`'s group that holds `rank`, in order of their `kind` coordinate.
  std::vector<int> group_of(GroupKind kind, int rank) const;
  // Every group of `kind`, ordered by its first rank.
  std::vector<std::vector<int>> groups(GroupKind kind) const;
  // "tp-dp-pp"
  std::string order_text() const;
};

// Parses an order such as "tp-dp-pp" (each of tp, dp, pp once, fastest first); false when malformed.
bool parse_order(std::string_view text, std::array<GroupKind, 3>& out);

}  // namespace dtrain::config
