#pragma once
// Why one worker ended, with what it said of its failure (agent/src/failure_report.hpp fills that
// in): the unit of the job machine's decisions, the failure summary and the reports to other nodes.
#include <optional>
#include <string>
#include <vector>

namespace dtrain::agent {

// What torch's @record (torch.distributed.elastic.multiprocessing.errors) wrote to a worker's
// TORCHELASTIC_ERROR_FILE.
struct ErrorReport {
  std::string file;       // the path
  std::string message;    // "ValueError: bad value"
  std::string traceback;  // extraInfo.py_callstack ("" when absent)
  std::string timestamp;  // extraInfo.timestamp, seconds since the epoch as written ("" when absent)
};

// Why one worker ended.
struct WorkerExit {
  int rank = -1;
  int local_rank = -1;
  int node_rank = 0;
  long pid = 0;
  int exit_code = 0;        // valid when signal == 0
  int signal = 0;           // terminating signal, 0 when it exited
  int exec_errno = 0;       // the command could not be executed (ENOENT, EACCES, ...)
  bool workdir_error = false;  // exec_errno is from entering the workdir, before the exec
  bool cpus_error = false;     // exec_errno is from binding it to its CPUs (cluster.cpu_bind), before the exec
  bool stopped_by_agent = false;  // ended after the agent sent it SIGTERM/SIGKILL
  double duration_s = 0;
  std::vector<std::string> last_stderr;  // last lines of its stderr
  std::vector<std::string> first_exception;  // the first Python exception block on its stderr
  std::string error_file;                // its TORCHELASTIC_ERROR_FILE ("" : none)
  std::optional<ErrorReport> error;      // what was written there
  std::optional<int> peer_failure;       // its collectives saw this rank fail (-1: a peer not named)
  std::string hint;                      // advice for the summary (the interpreter of a ModuleNotFoundError)
  // The rank the job hung on (it was alive then; exit_code is 70): its process state ("T stopped")
  // and where it was against the others ("never reached allreduce #95; rank 2 waits in it").
  std::string hang_state, hang;
  // A root cause on another node (multi-node): its host, and its failure as that node reported it
  // (a heading line, then the lines of its error file, first exception or stderr tail).
  bool remote = false;
  std::string host;
  std::vector<std::string> report;
  int status() const;       // exit code, 128+signal, 127/126 on exec failure
  // "exit code 3" / "killed by SIGSEGV (11)" / "could not execute the command (...)" /
  // "hung (state T stopped): never reached allreduce #95; rank 2 waits in it"
  std::string describe() const;
};

// "SIGSEGV" (or "signal 99" for a number without a name).
std::string signal_name(int sig);

}  // namespace dtrain::agent
