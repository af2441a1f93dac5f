#pragma once
// What gets executed: the job's command, checked as execvp would find it before anything is
// spawned, and the program that runs the guardian (dtrain-shim, or the dtrain binary's own
// `__guard`).
#include <filesystem>
#include <string>

namespace dtrain::agent {

struct Resolved {
  int code = 0;  // 0, exit_code::not_found, exit_code::not_executable (exit_code::usage: empty)
  std::string message;
};

// Looks `cmd` up as execvp would: a name with a '/' relative to `workdir`, else along `path_var`
// (relative PATH entries relative to `workdir`). Names what was wrong and what to do.
Resolved resolve_command(const std::string& cmd, const std::string& path_var, const std::filesystem::path& workdir);

// The guardian's program: exec'd as `exe guard_word`.
struct GuardianProgram {
  std::string exe;
  std::string guard_word = "__guard";  // its argv[1]
};

// `shim` as in AgentOptions::shim: "" looks for dtrain-shim next to `self_exe` (or in
// ../libexec/dtrain/), falling back to the dtrain binary; "self" forces the dtrain binary; else
// the path of a dtrain-shim. `self_exe` "" means /proc/self/exe.
GuardianProgram find_guardian_program(const std::string& self_exe, const std::string& shim);

}  // namespace dtrain::agent
