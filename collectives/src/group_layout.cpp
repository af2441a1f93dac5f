#include "group_layout.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"

namespace dtrain::coll {
namespace {

constexpr const char* kShort[3] = {"tp", "pp", "dp"};
constexpr const char* kSize[3] = {"DTRAIN_TP_SIZE", "DTRAIN_PP_SIZE", "DTRAIN_DP_SIZE"};
constexpr const char* kRank[3] = {"DTRAIN_TP_RANK", "DTRAIN_PP_RANK", "DTRAIN_DP_RANK"};
constexpr const char* kNeed =
    "dtrain_comm_init_group_from_env needs the parallel layout that `dtrain launch` gives every worker "
    "(RANK, WORLD_SIZE, DTRAIN_TP_RANK/SIZE, DTRAIN_PP_RANK/SIZE, DTRAIN_DP_RANK/SIZE, "
    "DTRAIN_PARALLEL_ORDER; see dtrain-launch(1))";

int number(const std::function<std::string(const char*)>& env, const char* name) {
  const std::string v = env(name);
  if (v.empty()) throw ConfigError(fmt::format("{} is not set: {}", name, kNeed));
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 30) throw ConfigError(fmt::format("{}={}: expected a non-negative integer", name, v));
  return static_cast<int>(x);
}

// "tp-dp-pp" -> {0, 2, 1} (kinds, fastest first).
std::array<int, 3> parse_order(const std::string& text) {
  std::array<int, 3> order{};
  std::size_t pos = 0;
  int seen = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? text.find('-', pos) : text.size();
    const std::string part =
        end == std::string::npos || pos > text.size() ? std::string() : text.substr(pos, end - pos);
    int k = 0;
    while (k < 3 && part != kShort[k]) ++k;
    if (k == 3 || (seen & (1 << k)) != 0)
      throw ConfigError(fmt::format("DTRAIN_PARALLEL_ORDER={}: expected tp, pp and dp once each, fastest first, "
                                    "joined by '-' (e.g. tp-dp-pp)",
                                    text));
    seen |= 1 << k;
    order[static_cast<std::size_t>(i)] = k;
    pos = end + 1;
  }
  return order;
}

}  // namespace

GroupColor group_color(int kind, const std::function<std::string(const char*)>& env) {
  if (kind < 0 || kind > 2)
    throw ConfigError(fmt::format("group kind {} is not DTRAIN_GROUP_TENSOR, DTRAIN_GROUP_PIPELINE or "
                                  "DTRAIN_GROUP_DATA",
                                  kind));
  const int rank = number(env, "RANK"), world = number(env, "WORLD_SIZE");
  std::string order_text = env("DTRAIN_PARALLEL_ORDER");
  if (order_text.empty()) throw ConfigError(fmt::format("DTRAIN_PARALLEL_ORDER is not set: {}", kNeed));
  const std::array<int, 3> order = parse_order(order_text);
  int size[3], coord[3];
  for (int k = 0; k < 3; ++k) {
    size[k] = number(env, kSize[k]);
    coord[k] = number(env, kRank[k]);
    if (size[k] < 1 || coord[k] >= size[k])
      throw ConfigError(fmt::format("{}={} with {}={}: the coordinate must be below the size", kRank[k], coord[k],
                                    kSize[k], size[k]));
  }
  if (static_cast<long long>(size[0]) * size[1] * size[2] != world)
    throw ConfigError(fmt::format("the layout does not match the world: DTRAIN_TP_SIZE={} x DTRAIN_PP_SIZE={} x "
                                  "DTRAIN_DP_SIZE={} is not WORLD_SIZE={}",
                                  size[0], size[1], size[2], world));
  int stride[3];
  int place = 1, computed = 0;
  for (int k : order) {
    stride[k] = place;
    computed += coord[k] * place;
    place *= size[k];
  }
  if (computed != rank)
    throw ConfigError(fmt::format("the layout coordinates do not match RANK={}: tp {}, pp {}, dp {} in order {} "
                                  "give rank {}",
                                  rank, coord[0], coord[1], coord[2], order_text, computed));
  return GroupColor{rank - coord[kind] * stride[kind], coord[kind], size[kind]};
}

}  // namespace dtrain::coll
