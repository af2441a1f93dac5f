#pragma once
// The ranks' Python stacks, for any backend: dtrain's start-up hook (python/dtrain/_startup/
// sitecustomize.py, first on the workers' PYTHONPATH) registers faulthandler in each Python worker
// on SIGURG, writing every thread's stack to <run folder>/stacks-R (DTRAIN_STACKS_FILE), a file
// whose first line, "dtrain-stacks pid N", names the process that registered. dump_stacks() sends
// the signal to those processes and reads what they append; a rank without such a file (a native
// worker, a Python run with -S or -I) or a process that cannot answer (stopped, gone) gets a clear
// "no stack". The agent dumps them on a hang; `dtrain status --stacks` on demand, and, across
// nodes, each node's agent when `dtrain status --stacks --rdzv` asks it through the rendezvous
// (control_thread.cpp answers with pack_stacks()).
// tests/agent/test_stacks.cpp.
#include <filesystem>
#include <string>
#include <vector>

namespace dtrain::agent {

// The signal the hook registers faulthandler on (its default action is to ignore it).
int stacks_signal();

// <dir>/stacks-R
std::filesystem::path stacks_file(const std::filesystem::path& dir, int rank);

struct RankStack {
  int rank = -1;
  long pid = 0;
  std::vector<std::string> lines;  // faulthandler's dump: "Thread 0x... (most recent call first):", "  File ..."
  std::string none;                // why there is no stack ("not a Python worker ..."); "" when there is one
};

// Signals every rank's Python process (the ranks whose stacks files are in `dir`, in rank order, and
// `ranks` besides, so that a rank without a file is named too) and waits up to `wait_s` for their dumps.
std::vector<RankStack> dump_stacks(const std::filesystem::path& dir, const std::vector<int>& ranks, double wait_s = 2.0);

// One line per place, ranks grouped: where each rank's main thread is, its innermost frame with the
// source line when it can be read: "rank 1: time.sleep(120) at train.py:42 in stall",
// "ranks 0, 2-3: work.wait() at distributed_c10d.py:1321 in all_reduce", "rank 4: no stack (...)".
std::vector<std::string> stack_summary(const std::vector<RankStack>& stacks);
// Every rank's full dump, under a "rank R (pid P):" heading each. What a worker wrote (its file
// names, its source lines) is made visible (visible_text.hpp), in both.
std::vector<std::string> stack_lines(const std::vector<RankStack>& stacks);

// A node's stacks as one text (what its agent answers through the rendezvous): the summary's
// lines, an empty line, then every rank's dump; unpack_stacks() splits it again.
struct StacksText {
  std::vector<std::string> summary, lines;
};
std::string pack_stacks(const StacksText& t);
StacksText unpack_stacks(const std::string& text);

}  // namespace dtrain::agent
