// visible_text.cpp: a worker's bytes shown like `cat -v` in dtrain's own lines, valid UTF-8 kept,
// long lines cut with a mark; the summary built from such bytes.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <iterator>
#include <random>
#include <string>

#include "dtrain/agent/result.hpp"
#include "visible_text.hpp"

using namespace dtrain::agent;

namespace {

// Whether s has a byte a terminal acts on (C0 but tab and newline, DEL, or a C1 control as UTF-8)
// or is no valid UTF-8 (the decoder replaces what is not).
bool terminal_safe(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) return false;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0) return false;
  }
  try {
    (void)nlohmann::json(s).dump();  // throws on bytes that are no valid UTF-8
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace

TEST_SUITE("agent::visible_text") {
  TEST_CASE("control bytes as cat -v shows them; printable ASCII and tabs as they are") {
    CHECK(visible_line("plain text\twith a tab") == "plain text\twith a tab");
    CHECK(visible_line("\x1b[2J\x1b[Hwiped") == "^[[2J^[[Hwiped");
    CHECK(visible_line("progress 10%\rERROR: hidden") == "progress 10%^MERROR: hidden");
    CHECK(visible_line("\x1b]0;title\x07") == "^[]0;title^G");
    CHECK(visible_line(std::string("nul\0del\x7f", 8)) == "nul^@del^?");
    CHECK(visible_line("a\nb") == "a^Jb");
  }

  TEST_CASE("valid UTF-8 kept, C1 controls and bytes that are no UTF-8 as M-x") {
    CHECK(visible_line("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5") == "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5");
    CHECK(visible_line("\xc2\x9b" "31m") == "M-^[31m");  // U+009B, a terminal's CSI
    CHECK(visible_line("\xe9t\xe9") == "M-itM-i");       // Latin-1, not UTF-8
    CHECK(visible_line("\xff\xfe") == "M-^?M-~");
    CHECK(visible_line("cut \xc3") == "cut M-C");               // a character cut short
    CHECK(visible_line("\xed\xa0\x80") == "M-mM- M-^@");         // a surrogate
    CHECK(visible_line("\xc0\xaf") == "M-@M-/");                 // overlong '/'
    CHECK(visible_line("\xf9\x82\xb8") == "M-yM-^BM-8");          // no lead byte past U+10FFFF
  }

  TEST_CASE("a long line is cut at a character, saying how many bytes were cut") {
    std::string l(5000, 'x');
    CHECK(visible_line(l) == std::string(kVisibleLineMax, 'x') + " [... 3000 more bytes cut]");
    CHECK(visible_line("\xc3\xa9\xc3\xa9\xc3\xa9", 3) == "\xc3\xa9\xc3\xa9 [... 2 more bytes cut]");
    CHECK(visible_line("\x1b\x1b\x1b", 3) == "^[^[ [... 1 more bytes cut]");
    CHECK(visible_line(std::string(kVisibleLineMax, 'y')) == std::string(kVisibleLineMax, 'y'));
  }

  TEST_CASE("any bytes: the result is terminal-safe UTF-8, bounded, and shown again unchanged") {
    std::mt19937 rng(2026);  // fixed: a failure reproduces
    const std::string pieces[] = {"\x1b[", "\r", "\xc3\xa9", "\xe2\x86\x92", "\xf0\x9f\x94\xa5", "\xc2\x9b", "\xed\xa0\x80",
                                  "\xf4\x90\x80\x80", "\xc0\xaf", "\x7f", "\t", "ok "};
    for (int round = 0; round < 20000; ++round) {
      std::string in;
      const int n = static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i)
        in += rng() % 2 == 0 ? pieces[rng() % std::size(pieces)] : std::string(1, static_cast<char>(rng() % 256));
      const std::size_t max = 1 + rng() % 64;
      const std::string out = visible_line(in, max);
      CAPTURE(in);
      REQUIRE(terminal_safe(out));
      REQUIRE(out.find('\n') == std::string::npos);
      const std::size_t cut = out.find(" [... ");
      REQUIRE(out.substr(0, cut).size() < max + 8);  // a character or an escape may pass the limit
      if (cut == std::string::npos) REQUIRE(visible_line(out, out.size() + 1) == out);
    }
  }

  TEST_CASE("cut_line: at a character, with the mark; visible_line counts an earlier cut in its own") {
    CHECK(cut_line("short", 5) == "short");
    CHECK(cut_line("abcdef", 4) == "abcd [... 2 more bytes cut]");
    CHECK(cut_line("ab\xc3\xa9\xc3\xa9", 3) == "ab [... 4 more bytes cut]");
    CHECK(visible_line(cut_line(std::string(100, 'z'), 50)) == std::string(50, 'z') + " [... 50 more bytes cut]");
    CHECK(visible_line(cut_line(std::string(100, 'z'), 50), 10) == std::string(10, 'z') + " [... 90 more bytes cut]");
  }

  TEST_CASE("visible_lines keeps the newlines between lines") {
    CHECK(visible_lines("one\r\ntwo\x1b[K\n") == "one^M\ntwo^[[K\n");
  }

  TEST_CASE("the summary shows a worker's escapes and carriage returns, never acts on them") {
    AgentResult r;
    r.exit_code = 1;
    WorkerExit w;
    w.rank = 1;
    w.exit_code = 1;
    w.first_exception = {"Traceback (most recent call last):", "  File \"t.py\", line 1\r\x1b[2K",
                         "ValueError: \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \xc2\x9b" "2J" + std::string(9000, 'z')};
    w.hint = "see\rhere";
    r.root_cause = w;
    r.reason = "rank 3 failed:\n    | \x1b[31mRuntimeError\x1b[0m\r";
    r.hang = {"rank 2: \x1b[1Aup"};
    const std::string s = summary_text(r);
    CHECK(terminal_safe(s));
    CHECK(s.find("    |   File \"t.py\", line 1^M^[[2K\n") != std::string::npos);
    CHECK(s.find("^[]8;;http://x^[\\link") != std::string::npos);
    CHECK(s.find("M-^[2J") != std::string::npos);
    CHECK(s.find("more bytes cut]\n") != std::string::npos);
    CHECK(s.find("  hint: see^Mhere\n") != std::string::npos);
    CHECK(s.find("  then: rank 3 failed:\n    | ^[[31mRuntimeError^[[0m^M\n") != std::string::npos);
    // the JSON keeps the bytes as data, escaped by JSON itself
    const auto j = nlohmann::json::parse(summary_json(r));
    CHECK(j["root_cause"]["hint"] == "see\rhere");
    CHECK(j["root_cause"]["first_exception"][1] == "  File \"t.py\", line 1\r\x1b[2K");
  }
}
