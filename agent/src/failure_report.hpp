#pragma once
// What a failed worker said about its failure, for the summary and the other nodes: the error file
// torch's @record writes (TORCHELASTIC_ERROR_FILE), else the first Python exception block on its
// stderr, else its last stderr lines; whether its collectives reported a peer's failure (then it is
// not the root cause when that peer failed too); and a hint for a ModuleNotFoundError.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtrain/agent/worker_exit.hpp"

namespace dtrain::agent {

// Catches the first "Traceback (most recent call last):" block of a stream of lines, through its
// exception line (the first line after it that is neither indented nor another header). Bounded: a
// long traceback keeps its head and its tail with the number of lines left out between them, and
// headers repeated before the first frame are only counted.
class FirstException {
 public:
  static constexpr std::size_t kHead = 12, kTail = 28;
  void line(std::string_view text);
  bool done() const { return state_ == State::done; }
  // The block (complete, or as far as it went when the stream ended); empty when none began.
  std::vector<std::string> lines() const;

 private:
  enum class State { waiting, in_block, done };
  State state_ = State::waiting;
  std::vector<std::string> head_, tail_;
  std::size_t skipped_ = 0;
  std::size_t repeated_headers_ = 0;
};

// torch.distributed.elastic's error file: {"message": {"message": "ValueError: ...", "extraInfo":
// {"py_callstack": "...", "timestamp": "..."}}} (or "message" as a plain string). nullopt when the
// file is absent, unreadable or not that shape.
std::optional<ErrorReport> read_error_file(const std::filesystem::path& path);

// <attempt folder>/<rank>/error.json, torchrun's layout; the folder is created, a stale file removed.
std::filesystem::path prepare_error_file(const std::filesystem::path& attempt_dir, int rank);

// Whether a worker's own words say that its collectives saw a peer fail ("rank 3 (pid 9) died",
// "closed the connection", "peer failure (4)", gloo's "Connection closed by peer"): the peer's rank
// (-1 when the text names none), or nullopt.
std::optional<int> peer_failure_in(std::string_view text, int own_rank);

// The interpreter that ran `command` (a python* program looked up along `path_var`, or a script's
// #! line), or "" when it is no Python command.
std::string python_interpreter(const std::vector<std::string>& command, const std::string& path_var,
                               const std::filesystem::path& workdir);

// Fills w.error (error file, else first exception, else nothing), w.peer_failure and w.hint from
// what was collected. `interpreter` as python_interpreter() gives it.
void explain(WorkerExit& w, const std::string& interpreter);

// The lines that show a failure's own words: its error file's message and traceback, its first
// exception, or its last stderr lines; `heading` says which ("first exception on its stderr").
struct Evidence {
  std::string heading;
  std::vector<std::string> lines;
};
Evidence evidence_of(const WorkerExit& w);

}  // namespace dtrain::agent
