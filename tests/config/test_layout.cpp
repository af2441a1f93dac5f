#include <doctest/doctest.h>

#include <set>
#include <tuple>

#include "dtrain/config/layout.hpp"

using namespace dtrain::config;

TEST_SUITE("config::layout") {
  TEST_CASE("the default order is Megatron-LM's: tensor fastest, then data, then pipeline") {
    Layout l;
    l.pipeline = 2;
    l.tensor = 2;
    l.data = 2;
    CHECK(l.order_text() == "tp-dp-pp");
    // rank = tp + 2 x (dp + 2 x pp)
    for (int r = 0; r < 8; ++r) {
      Coords c = l.coords(r);
      CAPTURE(r);
      CHECK(c.tp == r % 2);
      CHECK(c.dp == (r / 2) % 2);
      CHECK(c.pp == r / 4);
      CHECK(l.rank_of(c) == r);
    }
    CHECK(l.groups(GroupKind::tensor) == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
    CHECK(l.groups(GroupKind::data) == std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
    CHECK(l.groups(GroupKind::pipeline) == std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
    CHECK(l.group_of(GroupKind::pipeline, 5) == std::vector<int>{1, 5});
  }

  TEST_CASE("every order is a bijection and its groups partition the world") {
    for (const char* order : {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"}) {
      CAPTURE(order);
      Layout l;
      l.pipeline = 3;
      l.tensor = 2;
      l.data = 4;
      REQUIRE(parse_order(order, l.order));
      CHECK(l.order_text() == order);
      std::set<std::tuple<int, int, int>> seen;
      for (int r = 0; r < l.world(); ++r) {
        Coords c = l.coords(r);
        CHECK(c.tp < 2);
        CHECK(c.pp < 3);
        CHECK(c.dp < 4);
        CHECK(l.rank_of(c) == r);
        seen.insert({c.tp, c.pp, c.dp});
      }
      CHECK(seen.size() == 24);
      for (GroupKind k : {GroupKind::tensor, GroupKind::pipeline, GroupKind::data}) {
        auto gs = l.groups(k);
        CHECK(gs.size() * static_cast<std::size_t>(l.size(k)) == 24);
        std::set<int> members;
        for (const auto& g : gs) {
          for (std::size_t i = 0; i < g.size(); ++i) {
            members.insert(g[i]);
            // Members are listed by their coordinate of this kind; the others are shared.
            CHECK(l.coords(g[i]).of(k) == static_cast<int>(i));
            for (GroupKind other : {GroupKind::tensor, GroupKind::pipeline, GroupKind::data})
              if (other != k) CHECK(l.coords(g[i]).of(other) == l.coords(g[0]).of(other));
          }
        }
        CHECK(members.size() == 24);
      }
    }
  }

  TEST_CASE("the first coordinate of the order varies fastest") {
    Layout l;
    l.pipeline = 2;
    l.data = 3;
    REQUIRE(parse_order("pp-dp-tp", l.order));
    CHECK(l.coords(1).pp == 1);
    CHECK(l.coords(2).dp == 1);
    CHECK(l.groups(GroupKind::pipeline).front() == std::vector<int>{0, 1});
  }

  TEST_CASE("malformed orders are refused") {
    std::array<GroupKind, 3> o{};
    for (const char* bad : {"", "tp", "tp-dp", "tp-dp-pp-tp", "tp-tp-pp", "TP-DP-PP", "tp,dp,pp", "tp-dp-xx", "tp--pp"}) {
      CAPTURE(bad);
      CHECK_FALSE(parse_order(bad, o));
    }
  }
}
