#include "dtrain/common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "dtrain/common/params.hpp"
#include "dtrain/common/text.hpp"

namespace dtrain::log {
namespace {

struct Config {
  Level level = Level::warn;
  unsigned subsystems = ~0u;
};

unsigned parse_subsystems(std::string_view list) {
  unsigned mask = 0;
  while (!list.empty()) {
    auto comma = list.find(',');
    auto name = list.substr(0, comma);
    if (name == "cli") mask |= unsigned(Subsys::cli);
    else if (name == "config") mask |= unsigned(Subsys::config);
    else if (name == "rdzv") mask |= unsigned(Subsys::rdzv);
    else if (name == "agent") mask |= unsigned(Subsys::agent);
    else if (name == "coll") mask |= unsigned(Subsys::coll);
    else if (name == "net") mask |= unsigned(Subsys::net);
    else if (name == "all") mask |= ~0u;
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return mask | unsigned(Subsys::general);
}

Config read_config() {
  Config c;
  std::string spec = param_string("DTRAIN_LOG");
  std::string_view s = spec;
  auto colon = s.find(':');
  auto lvl = s.substr(0, colon);
  if (lvl == "error") c.level = Level::error;
  else if (lvl == "info") c.level = Level::info;
  else if (lvl == "debug") c.level = Level::debug;
  else if (lvl == "trace") c.level = Level::trace;
  if (colon != std::string_view::npos) c.subsystems = parse_subsystems(s.substr(colon + 1));
  return c;
}

std::atomic<int> g_level{-1};
std::atomic<unsigned> g_subsystems{~0u};
std::mutex g_tag_mutex;
std::string g_tag = "dtrain";

void ensure_init() {
  if (g_level.load(std::memory_order_acquire) >= 0) return;
  Config c = read_config();
  g_subsystems.store(c.subsystems, std::memory_order_relaxed);
  int expected = -1;
  g_level.compare_exchange_strong(expected, int(c.level), std::memory_order_acq_rel);
}

const char* level_name(Level l) {
  switch (l) {
    case Level::error: return "error";
    case Level::warn: return "warning";
    case Level::info: return "info";
    case Level::debug: return "debug";
    case Level::trace: return "trace";
  }
  return "?";
}

}  // namespace

bool enabled(Level level, Subsys subsys) {
  if (level <= Level::warn) return true;
  ensure_init();
  return int(level) <= g_level.load(std::memory_order_relaxed) &&
         (g_subsystems.load(std::memory_order_relaxed) & unsigned(subsys)) != 0;
}

void set_level(Level level) {
  ensure_init();
  g_level.store(int(level), std::memory_order_release);
}

void set_tag(std::string_view tag) {
  std::lock_guard lock(g_tag_mutex);
  g_tag = tag;
}

void write(Level level, Subsys, const char* file, int line, std::string_view msg) {
  std::string tag;
  {
    std::lock_guard lock(g_tag_mutex);
    tag = g_tag;
  }
  // the source location is for developers: shown under DTRAIN_LOG=debug (or trace) only
  ensure_init();
  bool located = g_level.load(std::memory_order_relaxed) >= int(Level::debug);
  const char* base = std::strrchr(file, '/');
  std::string where = located ? fmt::format(" [{}:{}]", base ? base + 1 : file, line) : std::string();
  std::string out;
  // One line each: text from peers (client names, run ids) can never start a line or send escapes.
  const std::string clean = text::printable(msg);
  if (level <= Level::warn || level >= Level::debug)
    out = fmt::format("{}: {}: {}{}\n", tag, level_name(level), clean, where);
  else
    out = fmt::format("{}: {}{}\n", tag, clean, where);
  // One write(2) per line so lines from several threads or processes never mix.
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

}  // namespace dtrain::log
