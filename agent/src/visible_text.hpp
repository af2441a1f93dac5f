#pragma once
// A worker's bytes made safe to print in dtrain's own lines (the summary, the failure reports of
// other nodes): control bytes shown as `cat -v` shows them (ESC as ^[, CR as ^M, DEL as ^?), bytes
// that are no valid UTF-8 as M-x, C1 controls as M-^x; valid UTF-8 text is kept as it is. A line
// longer than a limit is cut at a character, with a mark saying how many bytes were cut.
#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain::agent {

inline constexpr std::size_t kVisibleLineMax = 2000;  // bytes of a line's text shown before it is cut

// One line made visible: no byte of the result is a control byte (tab kept), and it is valid UTF-8.
// The input's newlines are controls too (^J): split text into lines first. A mark of cut_line() at
// its end is kept in the count of bytes cut.
std::string visible_line(std::string_view text, std::size_t max_bytes = kVisibleLineMax);

// The first max_bytes of a line (fewer, not to split a UTF-8 character), with the mark visible_line
// writes (" [... N more bytes cut]"); a shorter line as it is. visible_line() of a line so cut
// counts the bytes cut here in its own mark.
std::string cut_line(std::string_view text, std::size_t max_bytes);

// Each line of a text made visible, joined again with newlines.
std::string visible_lines(std::string_view text, std::size_t max_bytes = kVisibleLineMax);

}  // namespace dtrain::agent
