#pragma once
// MPI_Comm_split over any engine. One allgather over the parent (an OpKind::comm_split call, so a
// rank that splits while another calls a collective is a reported mismatch) gives every rank each
// one's (color, key, rank, host, flag); the ranks of a color, ordered by (key, parent rank), form
// the new group, whose store keys live under "<parent prefix>split/<n>/<color>/" (n: the parent's
// split count), so groups of one split, and of successive splits, never meet in the store. The new
// group knows the host of every member, so all of them pick the same engine (engine/factory.cpp).
#include <cstdint>
#include <optional>

#include "call.hpp"
#include "engine/engine.hpp"
#include "members.hpp"

namespace dtrain::coll {

struct SplitPlan {
  std::optional<Members> members;  // this rank's new group; none for a negative color
  bool all_flag = false;           // `flag` ANDed over every rank of the parent
};

// The comm_split call d (count: split_fields, dtype int64) over the parent's engine; n: the parent's
// split count, from 1.
inline constexpr std::size_t split_fields = 5;
SplitPlan plan_split(Engine& engine, const OpDesc& d, const Members& parent, std::uint64_t n, int color, int key,
                     bool flag);

}  // namespace dtrain::coll
