// MPI_Comm_split over any engine (split.hpp).
#include "split.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>

namespace dtrain::coll {
namespace {
enum : std::size_t { kColor, kKey, kRank, kHost, kFlag };
}  // namespace

SplitPlan plan_split(Engine& engine, const OpDesc& d, const Members& parent, std::uint64_t n, int color, int key,
                     bool flag) {
  const int size = parent.size();
  const std::array<std::int64_t, split_fields> mine = {color < 0 ? -1 : color, key, parent.rank, parent.host,
                                                       flag ? 1 : 0};
  std::vector<std::int64_t> all(split_fields * static_cast<std::size_t>(size));
  engine.allgather(d, mine.data(), all.data());
  auto field = [&](int r, std::size_t f) { return all[static_cast<std::size_t>(r) * split_fields + f]; };
  SplitPlan out;
  out.all_flag = true;
  for (int r = 0; r < size; ++r) out.all_flag = out.all_flag && field(r, kFlag) != 0;
  if (color < 0) return out;
  std::vector<int> same;  // parent ranks of this color, in the new order
  for (int r = 0; r < size; ++r)
    if (field(r, kColor) == color) same.push_back(r);
  std::stable_sort(same.begin(), same.end(), [&](int a, int b) { return field(a, kKey) < field(b, kKey); });
  Members g;
  for (std::size_t i = 0; i < same.size(); ++i) {
    g.world.push_back(parent.world[static_cast<std::size_t>(same[i])]);
    g.host_of.push_back(field(same[i], kHost));
    if (same[i] == parent.rank) g.rank = static_cast<int>(i);
  }
  g.host = parent.host;
  g.key_prefix = fmt::format("{}split/{}/{}/", parent.key_prefix, n, color);
  out.members = std::move(g);
  return out;
}

}  // namespace dtrain::coll
