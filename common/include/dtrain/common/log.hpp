#pragma once
// fmt-based logging gated by level and subsystem: DTRAIN_LOG=warn|info|debug|trace, optionally with
// subsystems, e.g. DTRAIN_LOG=debug:rdzv,net. Warnings and errors always print; the source file and
// line of a message are shown only at debug and trace.
#include <string_view>

#include <fmt/format.h>

namespace dtrain::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };
enum class Subsys : unsigned { general = 1, cli = 2, config = 4, rdzv = 8, agent = 16, coll = 32, net = 64 };

bool enabled(Level level, Subsys subsys);
void write(Level level, Subsys subsys, const char* file, int line, std::string_view msg);
// Overrides DTRAIN_LOG (tests, --verbose).
void set_level(Level level);
// Process name shown in each line, e.g. "dtrain" or "rank 3".
void set_tag(std::string_view tag);

}  // namespace dtrain::log

#define DTRAIN_LOG_AT(level, subsys, ...)                                                    \
  do {                                                                                       \
    if (::dtrain::log::enabled(level, subsys))                                               \
      ::dtrain::log::write(level, subsys, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__));   \
  } while (0)
#define DTRAIN_ERROR(subsys, ...) DTRAIN_LOG_AT(::dtrain::log::Level::error, ::dtrain::log::Subsys::subsys, __VA_ARGS__)
#define DTRAIN_WARN(subsys, ...) DTRAIN_LOG_AT(::dtrain::log::Level::warn, ::dtrain::log::Subsys::subsys, __VA_ARGS__)
#define DTRAIN_INFO(subsys, ...) DTRAIN_LOG_AT(::dtrain::log::Level::info, ::dtrain::log::Subsys::subsys, __VA_ARGS__)
#define DTRAIN_DEBUG(subsys, ...) DTRAIN_LOG_AT(::dtrain::log::Level::debug, ::dtrain::log::Subsys::subsys, __VA_ARGS__)
#define DTRAIN_TRACE(subsys, ...) DTRAIN_LOG_AT(::dtrain::log::Level::trace, ::dtrain::log::Subsys::subsys, __VA_ARGS__)
