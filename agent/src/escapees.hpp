#pragma once
// Escapees: processes that left their worker's process group (setsid, a double fork) and so escape
// the signals the agent sends to worker groups. The agent becomes a child subreaper
// (PR_SET_CHILD_SUBREAPER): a descendant whose parent dies is re-parented to the agent instead of
// to init, so the agent can still find it. While workers run, the agent reaps the ones that exit
// (reaper.hpp, which reaps every child of the process) and leaves the others alone (a helper a
// worker started in the background); when a generation is over, and at the end, it kills them with
// their descendants. (If the agent itself is SIGKILLed, the guardian finds them: guardian.hpp.)
//
// A child of the agent is an escapee when it is not one the agent spawned itself (`known`: the live
// workers; the guardian is nobody's child here, guardian.hpp). So when the agent has no child at all
// (waitid says so) there is no escapee, and /proc is not read. Only the dtrain binary turns this on:
// a process that embeds the agent may have children of its own.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

namespace dtrain::agent {

namespace proc {
struct Entry {
  pid_t pid = 0, ppid = 0, pgrp = 0;
  char state = '?';
};
// Every process of /proc (those that vanish while it is read are skipped).
std::vector<Entry> snapshot();
// From one /proc/PID/stat line: "PID (COMM) STATE PPID PGRP ..."; false when malformed.
bool parse_stat(const std::string& line, Entry& out);
// `roots` and all their descendants in `all`, by parent links, roots first.
std::vector<pid_t> descendants(const std::vector<Entry>& all, const std::vector<pid_t>& roots);
}  // namespace proc

class Escapees {
 public:
  using Known = std::function<std::set<pid_t>()>;

  // Makes this process a subreaper. Returns false, having done nothing, when the kernel refuses the
  // prctl.
  bool start(Known known);
  // SIGKILLs every escapee and its descendants and reaps the escapees, waiting up to `wait_ms` for
  // them to die. Returns whether none is left (false when inactive). Reads /proc only when this
  // process has a child (it has none once its workers are reaped, unless some left their groups).
  bool kill_all(int wait_ms);
  bool active() const { return active_; }

 private:
  std::vector<pid_t> unknown_children(const std::vector<proc::Entry>& all) const;

  bool active_ = false;
  Known known_;
};

}  // namespace dtrain::agent
