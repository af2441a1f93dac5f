// The program of a torchrun-style launch becomes the job's command (program.hpp).
#include "dtrain/config/program.hpp"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "dtrain/common/text.hpp"
#include "dtrain/config/errors.hpp"

namespace dtrain::config {
namespace {

namespace fs = std::filesystem;

bool executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::string job_name_of(const Program& p) {
  const std::string& first = p.words.front();
  if (p.mode == Program::Mode::module) return first;
  fs::path base = fs::path(first).filename();
  return p.mode == Program::Mode::script && base.extension() == ".py" ? base.stem().string() : base.string();
}

}  // namespace

std::string find_on_path(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) return executable_file(name) ? name : "";
  for (const auto& dir : text::split(path_var, ':')) {
    fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (executable_file(p)) return (dir.empty() ? fs::absolute(p) : p).lexically_normal().string();
  }
  return "";
}

ProgramCommand program_command(const Program& p, const Environment& env) {
  using Mode = Program::Mode;
  std::vector<SpecProblem> problems;
  if (p.words.empty() || p.words.front().empty())
    problems.push_back({"program", "missing; give the script to run, e.g. dtrain launch --nproc-per-node 2 train.py"});
  if (p.run_path && p.mode != Mode::script)
    problems.push_back({"--run-path", p.mode == Mode::module ? "runs a script by its path; drop it or -m"
                                                             : "runs a Python script; drop it or --no-python"});
  if (p.python && p.mode == Mode::program)
    problems.push_back({"--python", "names the interpreter of a script or module, but the program runs by itself "
                                    "(--no-python or --); drop one"});
  if (!problems.empty()) throw SpecError(kCommandLine, std::move(problems));

  ProgramCommand out;
  out.name = job_name_of(p);
  if (p.mode == Mode::program) {
    out.command = p.words;
    return out;
  }
  const std::string* path = env.get("PATH");
  std::string wanted = p.python.value_or("python3");
  out.python = find_on_path(wanted, path != nullptr ? *path : "");
  out.python_source = p.python ? "--python" : "python3 from PATH";
  if (out.python.empty()) {
    std::string what = p.python ? fmt::format("{} is not an executable file{}", wanted,
                                              wanted.find('/') == std::string::npos ? " on PATH" : "")
                                : fmt::format("python3 is not on PATH ({})", path != nullptr ? *path : "unset");
    throw SpecError(kCommandLine, {{"--python", what + "; give the interpreter with --python PATH, or --no-python "
                                                         "to run the program itself"}});
  }
  out.command = {out.python, "-u"};  // unbuffered, as torchrun runs it: lines reach the terminal at once
  if (p.mode == Mode::module) out.command.push_back("-m");
  out.command.insert(out.command.end(), p.words.begin(), p.words.end());
  return out;
}

void check_script(const Program& p, const JobSpec& spec) {
  if (p.mode != Program::Mode::script || p.words.empty()) return;
  fs::path script = p.words.front();
  fs::path where = script.is_absolute() ? script : fs::path(spec.workdir) / script;
  std::error_code ec;
  if (fs::is_regular_file(where, ec)) return;
  std::string dir = spec.workdir == "." ? std::string("the current directory") : "workdir " + spec.workdir;
  throw SpecError(kCommandLine,
                  {{script.string(), fs::exists(where, ec)
                                         ? fmt::format("is not a file (in {}); give the Python script to run", dir)
                                         : fmt::format("no such file (in {}); give the Python script to run, -m "
                                                       "MODULE for a module, or --no-python (or --) to run a program",
                                                       dir)}});
}

}  // namespace dtrain::config
