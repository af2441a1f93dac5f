#pragma once
// The parallel layout of the DTRAIN_TP/PP/DP_* environment, for dtrain_comm_init_group_from_env: the
// color and key of this rank's tensor, pipeline or data group under the rule of
// config::Layout (dtrain/config/layout.hpp), restated here because the collectives library links no
// config code: a rank's coordinates are its digits in the mixed radix whose order, fastest first,
// is DTRAIN_PARALLEL_ORDER ("tp-dp-pp": rank = tp + T x (dp + D x pp)); a group of one kind holds
// the ranks that share the other two coordinates, ranked by its own.
#include <array>
#include <functional>
#include <string>

namespace dtrain::coll {

struct GroupColor {
  int color = 0;  // the world rank of the group's first member: one value per group
  int key = 0;    // this rank's coordinate of the kind: its rank in the group
  int size = 1;   // the group's size
};

// The variables read through `env` (returns "" for an unset one): RANK, WORLD_SIZE,
// DTRAIN_{TP,PP,DP}_{RANK,SIZE}, DTRAIN_PARALLEL_ORDER. `kind`: 0 tensor, 1 pipeline, 2 data
// (dtrain_group_kind_t). Throws ConfigError naming what is missing or inconsistent.
GroupColor group_color(int kind, const std::function<std::string(const char*)>& env);

}  // namespace dtrain::coll
