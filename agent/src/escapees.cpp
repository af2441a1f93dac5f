// Escapees (escapees.hpp).
#include "escapees.hpp"

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

namespace proc {

bool parse_stat(const std::string& line, Entry& out) {
  // The command name may hold spaces and parentheses: it ends at the last ')'.
  auto open = line.find('(');
  auto close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 2 >= line.size()) return false;
  char* end = nullptr;
  long pid = std::strtol(line.c_str(), &end, 10);
  if (end == line.c_str() || pid <= 0) return false;
  const char* p = line.c_str() + close + 2;
  char state = *p;
  if (state == '\0' || p[1] != ' ') return false;
  long ppid = std::strtol(p + 2, &end, 10);
  if (end == p + 2) return false;
  long pgrp = std::strtol(end, &end, 10);
  out = Entry{static_cast<pid_t>(pid), static_cast<pid_t>(ppid), static_cast<pid_t>(pgrp), state};
  return true;
}

std::vector<Entry> snapshot() {
  std::vector<Entry> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    Entry entry;
    if (std::getline(in, line) && parse_stat(line, entry)) out.push_back(entry);
  }
  ::closedir(d);
  return out;
}

std::vector<pid_t> descendants(const std::vector<Entry>& all, const std::vector<pid_t>& roots) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& e : all) children.emplace(e.ppid, e.pid);
  std::vector<pid_t> out(roots);
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto [lo, hi] = children.equal_range(out[i]);
    for (auto it = lo; it != hi; ++it) out.push_back(it->second);
  }
  return out;
}

}  // namespace proc

namespace {

// Reaps pid when it has exited; true when it did (or it is not our child any more).
bool reap(pid_t pid) {
  int st = 0;
  pid_t r = ::waitpid(pid, &st, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

}  // namespace

bool Escapees::start(Known known) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    DTRAIN_WARN(agent, "cannot become a child subreaper ({}): processes that leave their worker's process group "
                       "may outlive the job", errno_text(errno));
    return false;
  }
  known_ = std::move(known);
  active_ = true;
  return true;
}

std::vector<pid_t> Escapees::unknown_children(const std::vector<proc::Entry>& all) const {
  std::set<pid_t> known = known_();
  pid_t self = ::getpid();
  std::vector<pid_t> out;
  for (const auto& e : all)
    if (e.ppid == self && known.count(e.pid) == 0) out.push_back(e.pid);
  return out;
}

namespace {

// Whether this process has a child, alive or not.
bool has_children() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 || errno != ECHILD;
}

}  // namespace

bool Escapees::kill_all(int wait_ms) {
  if (!active_) return false;
  if (!has_children()) return true;
  std::set<pid_t> killed;
  bool none_left = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    auto all = proc::snapshot();
    auto roots = unknown_children(all);
    std::vector<pid_t> alive;
    for (pid_t pid : roots)
      if (!reap(pid)) alive.push_back(pid);
    none_left = alive.empty();
    if (none_left || std::chrono::steady_clock::now() >= deadline) break;
    // Deepest first would leave new orphans to us anyway: kill the whole set at once.
    for (pid_t pid : proc::descendants(all, alive)) {
      const bool zombie = [&] {
        for (const auto& e : all)
          if (e.pid == pid) return e.state == 'Z';
        return false;
      }();
      if (!zombie && ::kill(pid, SIGKILL) == 0) killed.insert(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!killed.empty())
    DTRAIN_INFO(agent, "killed {} process(es) that had left their worker's process group", killed.size());
  return none_left;
}

}  // namespace dtrain::agent
