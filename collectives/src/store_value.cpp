// A store value that is not what the library writes there (store_value.hpp).
#include "store_value.hpp"

#include <fmt/format.h>

namespace dtrain::coll {

std::string junk_value_text(std::string_view key, rdzv::ByteView value, std::string_view expected) {
  constexpr std::size_t kShown = 64;
  std::string shown;
  for (std::size_t i = 0; i < value.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') shown += static_cast<char>(c);
    else shown += fmt::format("\\x{:02x}", c);
  }
  if (value.size() > kShown) shown += "...";
  return fmt::format("store key '{}' holds \"{}\" ({} bytes), not {}; does another job or program write this store "
                     "under the same run id?",
                     key, shown, value.size(), expected);
}

}  // namespace dtrain::coll
