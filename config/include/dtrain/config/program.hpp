#pragma once
// The program of a launch without a job file, torchrun's way (dtrain-launch(1), PROGRAM):
//   dtrain launch [flags] train.py [args]        python3 -u train.py args
//   dtrain launch [flags] -m pkg.train [args]    python3 -u -m pkg.train args
//   dtrain launch [flags] --no-python prog args  prog args
//   dtrain launch [flags] -- prog args           prog args
// The interpreter is --python, else PYTHON_EXEC (torchrun's variable), else python3 as PATH finds it
// (what `command -v python3` says); the plan shows which. With a job file too (--spec), the program
// replaces its command. A job file whose command starts with a Python (python, python3, python3.11,
// /usr/bin/python3) runs --python or PYTHON_EXEC instead, when one is given.
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"

namespace dtrain::config {

struct Program {
  enum class Mode { script, module, program };  // python SCRIPT / python -m MODULE / PROG itself
  Mode mode = Mode::script;
  std::vector<std::string> words;     // the script, module or program, then its arguments
  std::optional<std::string> python;  // --python; unset: python3 from PATH
  bool run_path = false;              // torchrun's --run-path: the script runs as a path (as here always)
};

struct ProgramCommand {
  std::vector<std::string> command;  // what every worker runs
  std::string name;                  // the job name it suggests: "train", "pkg.train", "prog"
  std::string python;                // the interpreter found ("" for a program)
  std::string python_source;         // "--python", "PYTHON_EXEC", "python3 from PATH", "the job's command"
};

// The interpreter: --python (flag), else PYTHON_EXEC, else python3 on PATH: {path, source}. Throws
// SpecError naming the one that is not there.
std::pair<std::string, std::string> find_python(const std::optional<std::string>& flag, const Environment& env);
// python, python3, python3.11, /usr/bin/python3 (a Python interpreter by name).
bool is_python_command(const std::string& word);
// A job file's Python command runs the chosen interpreter (--python, else PYTHON_EXEC): its first
// word is replaced. Returns the interpreter when the command is Python's; --python with a command
// that is not Python is refused (SpecError).
std::optional<ProgramCommand> retarget_python(JobSpec& spec, const std::optional<std::string>& flag,
                                              const Environment& env);

// Throws SpecError naming the flag at fault (no words, -m with --no-python, an interpreter that is
// not there).
ProgramCommand program_command(const Program& program, const Environment& env);

// A script that is not there is refused before anything starts (relative to the spec's workdir).
void check_script(const Program& program, const JobSpec& spec);

// Where `name` is on `path_var` as execvp would find it (a name with '/' as it is): "" when nowhere.
std::string find_on_path(const std::string& name, const std::string& path_var);

}  // namespace dtrain::config
