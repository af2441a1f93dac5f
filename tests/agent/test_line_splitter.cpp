#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "dtrain/agent/line_splitter.hpp"

using dtrain::agent::LineSplitter;

TEST_SUITE("agent::line_splitter") {
  TEST_CASE("line splitter keeps lines whole across chunk boundaries") {
    LineSplitter sp;
    std::vector<std::string> lines;
    auto on = [&](std::string_view l, bool cut) {
      CHECK_FALSE(cut);
      lines.emplace_back(l);
    };
    std::string in = "alpha\nbe";
    sp.feed(in.data(), in.size(), on);
    CHECK(lines == std::vector<std::string>{"alpha"});
    std::string in2 = "ta\n\ngam";
    sp.feed(in2.data(), in2.size(), on);
    CHECK(lines == std::vector<std::string>{"alpha", "beta", ""});
    CHECK(sp.has_partial());
    sp.flush(on);
    CHECK(lines.back() == "gam");
    CHECK_FALSE(sp.has_partial());
    sp.flush(on);
    CHECK(lines.size() == 4);
  }

  TEST_CASE("an overlong line is cut into pieces of the limit, each but the last flagged as cut") {
    LineSplitter sp(4);
    std::vector<std::string> lines;
    auto on = [&](std::string_view l, bool cut) { lines.emplace_back(std::string(l) + (cut ? "+" : "")); };
    std::string in = "abcdefghij\nxy";
    sp.feed(in.data(), in.size(), on);
    CHECK(lines == std::vector<std::string>{"abcd+", "efgh+", "ij"});
    SUBCASE("byte by byte") {
      LineSplitter s2(4);
      std::vector<std::string> l2;
      for (char c : std::string("abcdefghij\n"))
        s2.feed(&c, 1, [&](std::string_view l, bool cut) { l2.emplace_back(std::string(l) + (cut ? "+" : "")); });
      CHECK(l2 == std::vector<std::string>{"abcd+", "efgh+", "ij"});
    }
    SUBCASE("no newline ever: the agent holds at most one piece") {
      LineSplitter s3(4);
      std::string junk(1000, '\0');
      std::size_t pieces = 0;
      s3.feed(junk.data(), junk.size(), [&](std::string_view l, bool cut) {
        CHECK(l.size() == 4);
        CHECK(cut);
        ++pieces;
      });
      CHECK(pieces == 250);
      CHECK_FALSE(s3.has_partial());
    }
    CHECK(dtrain::agent::cut_mark(65536).find("line over 65536 bytes, cut here") != std::string::npos);
  }
}
