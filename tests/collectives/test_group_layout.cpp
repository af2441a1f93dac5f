// group_color(): the groups dtrain_comm_init_group_from_env builds are exactly config::Layout's
// (same members, same order) for every order and many shapes; and the environment's mistakes are
// refused naming the variable.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/layout.hpp"
#include "group_layout.hpp"

using dtrain::coll::group_color;
using dtrain::config::GroupKind;
using dtrain::config::Layout;

namespace {

using Env = std::map<std::string, std::string>;

Env env_of(const Layout& l, int rank) {
  const auto c = l.coords(rank);
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(l.world())},
          {"DTRAIN_TP_RANK", std::to_string(c.tp)},
          {"DTRAIN_TP_SIZE", std::to_string(l.tensor)},
          {"DTRAIN_PP_RANK", std::to_string(c.pp)},
          {"DTRAIN_PP_SIZE", std::to_string(l.pipeline)},
          {"DTRAIN_DP_RANK", std::to_string(c.dp)},
          {"DTRAIN_DP_SIZE", std::to_string(l.data)},
          {"DTRAIN_PARALLEL_ORDER", l.order_text()}};
}

auto lookup(const Env& e) {
  return [&e](const char* name) {
    auto it = e.find(name);
    return it == e.end() ? std::string() : it->second;
  };
}

std::string refusal(const Env& e, int kind = 0) {
  try {
    group_color(kind, lookup(e));
  } catch (const dtrain::ConfigError& err) {
    return err.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("collectives::group_layout") {
  TEST_CASE("the groups match config::Layout::group_of for every order and shape") {
    const char* orders[] = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};
    int checked = 0;
    for (const char* order : orders)
      for (int t : {1, 2, 3})
        for (int p : {1, 2, 4})
          for (int d : {1, 2, 3}) {
            Layout l;
            l.tensor = t;
            l.pipeline = p;
            l.data = d;
            REQUIRE(dtrain::config::parse_order(order, l.order));
            for (int kind = 0; kind < 3; ++kind) {
              // Members of each color, placed at their key.
              std::map<int, std::map<int, int>> groups;
              for (int r = 0; r < l.world(); ++r) {
                const Env e = env_of(l, r);
                const auto g = group_color(kind, lookup(e));
                CHECK(g.size == l.size(static_cast<GroupKind>(kind)));
                CHECK(groups[g.color].emplace(g.key, r).second);
              }
              for (int r = 0; r < l.world(); ++r) {
                const Env e = env_of(l, r);
                const auto g = group_color(kind, lookup(e));
                std::vector<int> members;
                for (auto [key, rank] : groups[g.color]) members.push_back(rank);
                CAPTURE(order);
                CAPTURE(kind);
                CAPTURE(r);
                CHECK(members == l.group_of(static_cast<GroupKind>(kind), r));
                ++checked;
              }
            }
          }
    CHECK(checked > 1000);
  }

  TEST_CASE("a missing or inconsistent layout is refused, naming what is wrong") {
    Layout l;
    l.tensor = 2;
    l.pipeline = 2;
    const Env good = env_of(l, 3);
    CHECK(refusal(good).empty());
    Env e = good;
    e.erase("DTRAIN_PP_SIZE");
    CHECK(refusal(e).find("DTRAIN_PP_SIZE is not set") != std::string::npos);
    CHECK(refusal(e).find("dtrain launch") != std::string::npos);
    e = good;
    e["WORLD_SIZE"] = "8";
    CHECK(refusal(e).find("is not WORLD_SIZE=8") != std::string::npos);
    e = good;
    e["RANK"] = "2";
    CHECK(refusal(e).find("do not match RANK=2") != std::string::npos);
    e = good;
    e["DTRAIN_TP_RANK"] = "2";
    CHECK(refusal(e).find("DTRAIN_TP_RANK=2 with DTRAIN_TP_SIZE=2") != std::string::npos);
    e = good;
    e["DTRAIN_PARALLEL_ORDER"] = "tp-dp";
    CHECK(refusal(e).find("DTRAIN_PARALLEL_ORDER=tp-dp: expected") != std::string::npos);
    e["DTRAIN_PARALLEL_ORDER"] = "tp-tp-pp";
    CHECK(refusal(e).find("expected tp, pp and dp once each") != std::string::npos);
    e = good;
    e["DTRAIN_DP_SIZE"] = "x";
    CHECK(refusal(e).find("DTRAIN_DP_SIZE=x: expected") != std::string::npos);
    CHECK(refusal(good, 3).find("group kind 3") != std::string::npos);
  }
}
