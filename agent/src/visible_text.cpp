// A worker's bytes made safe to print (visible_text.hpp).
#include "visible_text.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace dtrain::agent {
namespace {

// The length of the valid UTF-8 sequence at s[i] (no overlong form, no surrogate, at most
// U+10FFFF), or 0 when the byte there starts none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  const std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(k) & 0xc0) != 0x80) return 0;
  if (c == 0xe0 && b(1) < 0xa0) return 0;   // overlong
  if (c == 0xed && b(1) >= 0xa0) return 0;  // a surrogate
  if (c == 0xf0 && b(1) < 0x90) return 0;   // overlong
  if (c == 0xf4 && b(1) >= 0x90) return 0;  // past U+10FFFF
  return n;
}

// `cat -v` of one byte that is not shown as itself.
void caret(std::string& out, unsigned char c) {
  if (c >= 0x80) {
    out += "M-";
    c = static_cast<unsigned char>(c - 0x80);
  }
  if (c < 0x20) {
    out += '^';
    out += static_cast<char>(c + 0x40);
  } else if (c == 0x7f) {
    out += "^?";
  } else {
    out += static_cast<char>(c);
  }
}

constexpr std::string_view kCutOpen = " [... ", kCutClose = " more bytes cut]";

std::string cut_text(std::size_t bytes) { return fmt::format("{}{}{}", kCutOpen, bytes, kCutClose); }

// The bytes an earlier cut left out, by the mark at the end of text (then taken off text), or 0.
std::size_t earlier_cut(std::string_view& text) {
  if (!text.ends_with(kCutClose)) return 0;
  const std::size_t at = text.rfind(kCutOpen);
  if (at == std::string_view::npos) return 0;
  const std::string_view digits = text.substr(at + kCutOpen.size(), text.size() - kCutClose.size() - at - kCutOpen.size());
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size()) return 0;
  text = text.substr(0, at);
  return n;
}

}  // namespace

std::string cut_line(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t keep = max_bytes;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xc0) == 0x80) --keep;  // not inside a character
  return std::string(text.substr(0, keep)) + cut_text(text.size() - keep);
}

std::string visible_line(std::string_view text, std::size_t max_bytes) {
  const std::size_t cut_before = earlier_cut(text);
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 16);
  std::size_t i = 0;
  while (i < text.size() && out.size() < max_bytes) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20 && c < 0x7f) || c == '\t') {
      out += static_cast<char>(c);
      ++i;
    } else if (std::size_t n = c >= 0x80 ? utf8_length(text, i) : 0; n > 0) {
      // U+0080..U+009F (C2 80..C2 9F) are C1 controls: a terminal may take U+009B for ESC [
      if (c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) caret(out, static_cast<unsigned char>(text[i + 1]));
      else out.append(text.substr(i, n));
      i += n;
    } else {
      caret(out, c);
      ++i;
    }
  }
  if (i < text.size() || cut_before > 0) out += cut_text(text.size() - i + cut_before);
  return out;
}

std::string visible_lines(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (std::size_t start = 0;;) {
    const std::size_t nl = text.find('\n', start);
    out += visible_line(text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start),
                        max_bytes);
    if (nl == std::string_view::npos) return out;
    out += '\n';
    start = nl + 1;
  }
}

}  // namespace dtrain::agent
