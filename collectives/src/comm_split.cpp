// Communicator::split: MPI_Comm_split over a communicator. One allgather over the parent's engine
// (an OpKind::comm_split call, so a rank that splits while another calls a collective is a reported
// mismatch) gives every rank each one's (color, key, rank, host, flag); the ranks of a color, ordered
// by (key, parent rank), bootstrap a new communicator whose store keys live under
// "<parent prefix>split/<n>/<color>/" (n: the parent's split count), so groups of one split, and of
// successive splits, never meet in the store. The new communicator knows the host of every member,
// so all of them pick the same engine (engine/factory.cpp).
#include <algorithm>
#include <array>
#include <numeric>

#include <fmt/format.h>

#include "comm.hpp"

namespace dtrain::coll {
namespace {
enum : std::size_t { kColor, kKey, kRank, kHost, kFlag, kFields };
}  // namespace

Communicator::Split Communicator::split(int color, int key, bool flag) {
  OpDesc d = next(OpKind::comm_split, kFields, DTRAIN_INT64, DTRAIN_SUM, 0);
  const std::uint64_t n = ++splits_;
  const std::array<std::int64_t, kFields> mine = {color < 0 ? -1 : color, key, rank_, host_, flag ? 1 : 0};
  std::vector<std::int64_t> all(kFields * static_cast<std::size_t>(size()));
  run(&d, [&] { engine_->allgather(d, mine.data(), all.data()); });
  auto field = [&](int r, std::size_t f) { return all[static_cast<std::size_t>(r) * kFields + f]; };
  Split out;
  out.all_flag = true;
  for (int r = 0; r < size(); ++r) out.all_flag = out.all_flag && field(r, kFlag) != 0;
  if (color < 0) return out;
  std::vector<int> same;  // parent ranks of this color, in the new order
  for (int r = 0; r < size(); ++r)
    if (field(r, kColor) == color) same.push_back(r);
  std::stable_sort(same.begin(), same.end(), [&](int a, int b) { return field(a, kKey) < field(b, kKey); });
  Group g;
  for (std::size_t i = 0; i < same.size(); ++i) {
    g.members.push_back(members_[static_cast<std::size_t>(same[i])]);
    g.host_of.push_back(field(same[i], kHost));
    if (same[i] == rank_) g.rank = static_cast<int>(i);
  }
  g.host = host_;
  g.key_prefix = fmt::format("{}split/{}/{}/", key_prefix_, n, color);
  out.comm.reset(new Communicator(cfg_, store_, std::move(g)));
  return out;
}

}  // namespace dtrain::coll
