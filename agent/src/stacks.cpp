// The ranks' Python stacks (dtrain/agent/stacks.hpp).
#include "dtrain/agent/stacks.hpp"

#include <signal.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "dtrain/agent/hang.hpp"
#include "visible_text.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

namespace {

constexpr char kHeader[] = "dtrain-stacks pid ";
constexpr char kPrefix[] = "stacks-";
constexpr char kNoHook[] = "no stack: not a Python worker (or dtrain's start-up hook did not run in it: python -S or -I)";

long header_pid(const fs::path& file) {
  std::ifstream in(file);
  std::string first;
  if (!std::getline(in, first) || first.rfind(kHeader, 0) != 0) return 0;
  return std::atol(first.c_str() + sizeof kHeader - 1);
}

std::uintmax_t size_of(const fs::path& file) {
  std::error_code ec;
  auto n = fs::file_size(file, ec);
  return ec ? 0 : n;
}

std::vector<std::string> lines_from(const fs::path& file, std::uintmax_t from) {
  std::ifstream in(file);
  in.seekg(static_cast<std::streamoff>(from));
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

// Every rank with a stacks file in `dir`, and `ranks`.
std::set<int> ranks_in(const fs::path& dir, const std::vector<int>& ranks) {
  std::set<int> out(ranks.begin(), ranks.end());
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    char* endp = nullptr;
    long r = std::strtol(name.c_str() + sizeof kPrefix - 1, &endp, 10);
    if (endp != name.c_str() + sizeof kPrefix - 1 && *endp == '\0') out.insert(static_cast<int>(r));
  }
  return out;
}

// Why a process cannot dump its stack now ("" when it can).
std::string unable(long pid) {
  char state = process_state(pid);
  if (state == 0) return fmt::format("no stack: its process (pid {}) is gone", pid);
  if (state == 'T' || state == 't' || state == 'Z')
    return fmt::format("no stack: its process (pid {}) cannot answer (state {})", pid, state_text(state));
  return "";
}

// faulthandler's frame line: '  File "/a/b.py", line 42 in name'
struct Frame {
  std::string file, func;
  int line = 0;
};

std::optional<Frame> frame_of(const std::string& l) {
  auto q1 = l.find("File \"");
  if (q1 == std::string::npos) return std::nullopt;
  auto q2 = l.find("\", line ", q1 + 6);
  if (q2 == std::string::npos) return std::nullopt;
  Frame f;
  f.file = l.substr(q1 + 6, q2 - q1 - 6);
  char* endp = nullptr;
  f.line = static_cast<int>(std::strtol(l.c_str() + q2 + 8, &endp, 10));
  const char* in = std::strstr(endp, " in ");
  f.func = in ? std::string(in + 4) : "?";
  return f;
}

std::string source_line(const std::string& file, int line) {
  std::ifstream in(file);
  std::string l;
  for (int i = 0; i < line && std::getline(in, l); ++i) {
  }
  if (!in) return "";
  auto b = l.find_first_not_of(" \t");
  return b == std::string::npos ? "" : l.substr(b, 120);
}

// Where a rank's main thread (faulthandler lists it last) is: its innermost frame.
std::string place_of(const RankStack& s) {
  if (!s.none.empty()) return s.none;
  std::size_t block = 0;
  for (std::size_t i = 0; i < s.lines.size(); ++i)
    if (s.lines[i].rfind("Thread 0x", 0) == 0 || s.lines[i].rfind("Current thread 0x", 0) == 0) block = i;
  for (std::size_t i = block; i < s.lines.size(); ++i) {
    auto f = frame_of(s.lines[i]);
    if (!f || f->file.find("/_startup/sitecustomize.py") != std::string::npos) continue;
    std::string where = fmt::format("{}:{} in {}", fs::path(f->file).filename().string(), f->line, f->func);
    std::string code = source_line(f->file, f->line);
    return code.empty() ? where : fmt::format("{} at {}", code, where);
  }
  return "no stack: the dump had no Python frame";
}

}  // namespace

int stacks_signal() { return SIGURG; }

fs::path stacks_file(const fs::path& dir, int rank) { return dir / fmt::format("{}{}", kPrefix, rank); }

std::vector<RankStack> dump_stacks(const fs::path& dir, const std::vector<int>& ranks, double wait_s) {
  struct Asked {
    std::size_t at;  // in `out`
    std::uintmax_t from, seen;
  };
  std::vector<RankStack> out;
  std::vector<Asked> asked;
  for (int r : ranks_in(dir, ranks)) {
    RankStack s;
    s.rank = r;
    s.pid = header_pid(stacks_file(dir, r));
    s.none = s.pid <= 0 ? kNoHook : unable(s.pid);
    if (s.none.empty()) {
      auto from = size_of(stacks_file(dir, r));
      if (::kill(static_cast<pid_t>(s.pid), stacks_signal()) != 0)
        s.none = fmt::format("no stack: cannot signal pid {}: {}", s.pid, std::strerror(errno));
      else
        asked.push_back({out.size(), from, from});
    }
    out.push_back(std::move(s));
  }
  // a dump is whole once its file stops growing (faulthandler writes it in one go, frame by frame)
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  std::vector<bool> done(asked.size(), false);
  for (std::size_t left = asked.size(); left > 0 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (std::size_t i = 0; i < asked.size(); ++i) {
      if (done[i]) continue;
      auto n = size_of(stacks_file(dir, out[asked[i].at].rank));
      if (n > asked[i].from && n == asked[i].seen) done[i] = true, --left;
      asked[i].seen = n;
    }
  }
  for (std::size_t i = 0; i < asked.size(); ++i) {
    auto& s = out[asked[i].at];
    s.lines = lines_from(stacks_file(dir, s.rank), asked[i].from);
    if (s.lines.empty()) s.none = fmt::format("no stack: pid {} did not answer within {:.1f} s", s.pid, wait_s);
  }
  return out;
}

std::vector<std::string> stack_summary(const std::vector<RankStack>& stacks) {
  std::vector<std::pair<std::string, std::vector<int>>> places;  // in the order first seen
  for (const auto& s : stacks) {
    std::string p = place_of(s);
    auto it = std::find_if(places.begin(), places.end(), [&](const auto& x) { return x.first == p; });
    if (it == places.end()) places.push_back({p, {s.rank}});
    else it->second.push_back(s.rank);
  }
  std::vector<std::string> out;
  for (const auto& [p, ranks] : places)
    out.push_back(fmt::format("rank{} {}: {}", ranks.size() == 1 ? "" : "s", ranks_text(ranks), visible_line(p)));
  return out;
}

std::vector<std::string> stack_lines(const std::vector<RankStack>& stacks) {
  std::vector<std::string> out;
  for (const auto& s : stacks) {
    if (!s.none.empty()) {
      out.push_back(fmt::format("rank {}: {}", s.rank, s.none));
      continue;
    }
    out.push_back(fmt::format("rank {} (pid {}):", s.rank, s.pid));
    for (const auto& l : s.lines) out.push_back("  " + visible_line(l));
  }
  return out;
}

std::string pack_stacks(const StacksText& t) {
  std::string out;
  for (const auto& l : t.summary) out += l + "\n";
  out += "\n";
  for (const auto& l : t.lines) out += l + "\n";
  return out;
}

StacksText unpack_stacks(const std::string& text) {
  StacksText t;
  auto* into = &t.summary;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string l = text.substr(at, end - at);
    at = end + 1;
    if (l.empty()) into = &t.lines;
    else into->push_back(visible_line(l));
  }
  return t;
}

}  // namespace dtrain::agent
