#pragma once
// Where a worker's output goes: its raw bytes to its log files (when kept), its whole lines, tagged
// and optionally timestamped, to the terminal (for the ranks shown there), and the last lines of
// its stderr and the first Python exception block on it to its WorkerExit (the failure summary).
#include <cstddef>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtrain/agent/line_prefix.hpp"
#include "dtrain/agent/line_splitter.hpp"
#include "dtrain/agent/options.hpp"
#include "dtrain/config/plan.hpp"
#include "failure_report.hpp"
#include "terminal.hpp"

namespace dtrain::agent {

// One worker's two streams.
class WorkerOutput {
 public:
  WorkerOutput() = default;
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  std::vector<std::string> stderr_tail() const { return {last_err_.begin(), last_err_.end()}; }
  std::vector<std::string> first_exception() const { return first_exception_.lines(); }

 private:
  friend class OutputRouter;
  struct Stream {
    LineSplitter lines;
    int log_fd = -1;
    std::string tag;
  };
  Stream& stream(bool is_err) { return is_err ? err_ : out_; }

  int rank_ = -1;
  bool to_terminal_ = true;
  int redirected_ = 0;  // streams kept off the terminal (--redirects): 1 stdout, 2 stderr
  Stream out_, err_;
  std::deque<std::string> last_err_;
  FirstException first_exception_;
};

class OutputRouter {
 public:
  static constexpr std::size_t kLastLines = 10;         // stderr lines kept for the summary
  static constexpr std::size_t kTailLineBytes = 4096;   // of each (the summary shows lines, not megabytes)

  // `spec`: the job's output section (tag, tag format, timestamps); `options`: the launch's flags.
  OutputRouter(const config::OutputSpec& spec, OutputOptions options, Terminal& terminal);

  // Tags (format_tag: ConfigError for a bad format), terminal filter and, with `log_dir`,
  // rank-R.out / rank-R.err opened there.
  void open(WorkerOutput& w, const config::RankInfo& r, const std::optional<std::filesystem::path>& log_dir) const;
  // Bytes read from a worker's stdout or stderr.
  void feed(WorkerOutput& w, bool is_err, const char* data, std::size_t n);
  // The stream reached its end (or is abandoned): its unterminated last line, if any.
  void end(WorkerOutput& w, bool is_err);

 private:
  void line(WorkerOutput& w, bool is_err, std::string_view text, bool cut, const std::string& ts);
  std::string timestamp() const;

  config::OutputSpec spec_;
  OutputOptions opt_;
  Terminal& terminal_;
};

}  // namespace dtrain::agent
