#include "dtrain/config/layout.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "dtrain/common/text.hpp"

namespace dtrain::config {

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::tensor: return "tensor";
    case GroupKind::pipeline: return "pipeline";
    case GroupKind::data: return "data";
  }
  return "?";
}

const char* group_kind_short(GroupKind kind) {
  switch (kind) {
    case GroupKind::tensor: return "tp";
    case GroupKind::pipeline: return "pp";
    case GroupKind::data: return "dp";
  }
  return "?";
}

int Coords::of(GroupKind kind) const {
  switch (kind) {
    case GroupKind::tensor: return tp;
    case GroupKind::pipeline: return pp;
    case GroupKind::data: return dp;
  }
  return 0;
}

int Layout::size(GroupKind kind) const {
  switch (kind) {
    case GroupKind::tensor: return tensor;
    case GroupKind::pipeline: return pipeline;
    case GroupKind::data: return data;
  }
  return 1;
}

Coords Layout::coords(int rank) const {
  Coords c;
  for (GroupKind k : order) {
    int digit = rank % size(k);
    rank /= size(k);
    if (k == GroupKind::tensor) c.tp = digit;
    else if (k == GroupKind::pipeline) c.pp = digit;
    else c.dp = digit;
  }
  return c;
}

int Layout::rank_of(const Coords& c) const {
  int rank = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) rank = rank * size(*it) + c.of(*it);
  return rank;
}

std::vector<int> Layout::group_of(GroupKind kind, int rank) const {
  Coords c = coords(rank);
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(size(kind)));
  for (int i = 0; i < size(kind); ++i) {
    Coords m = c;
    if (kind == GroupKind::tensor) m.tp = i;
    else if (kind == GroupKind::pipeline) m.pp = i;
    else m.dp = i;
    out.push_back(rank_of(m));
  }
  return out;
}

std::vector<std::vector<int>> Layout::groups(GroupKind kind) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> seen(static_cast<std::size_t>(world()), false);
  for (int r = 0; r < world(); ++r) {
    if (seen[static_cast<std::size_t>(r)]) continue;
    auto g = group_of(kind, r);
    for (int m : g) seen[static_cast<std::size_t>(m)] = true;
    out.push_back(std::move(g));
  }
  return out;
}

std::string Layout::order_text() const {
  return fmt::format("{}-{}-{}", group_kind_short(order[0]), group_kind_short(order[1]), group_kind_short(order[2]));
}

bool parse_order(std::string_view text, std::array<GroupKind, 3>& out) {
  auto parts = text::split(text, '-');
  if (parts.size() != 3) return false;
  std::array<GroupKind, 3> got{};
  for (std::size_t i = 0; i < 3; ++i) {
    bool found = false;
    for (GroupKind k : {GroupKind::tensor, GroupKind::pipeline, GroupKind::data})
      if (parts[i] == group_kind_short(k)) {
        got[i] = k;
        found = true;
      }
    if (!found) return false;
  }
  if (got[0] == got[1] || got[0] == got[2] || got[1] == got[2]) return false;
  out = got;
  return true;
}

}  // namespace dtrain::config
