// The program of a torchrun-style launch becomes the job's command (program.hpp).
#include "dtrain/config/program.hpp"

#include <unistd.h>

#include <filesystem>
#include <tuple>

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

std::pair<std::string, std::string> find_python(const std::optional<std::string>& flag, const Environment& env) {
  const std::string* path = env.get("PATH");
  const std::string* exec = env.get("PYTHON_EXEC");
  if (exec != nullptr && exec->empty()) exec = nullptr;
  std::string source = flag ? "--python" : exec != nullptr ? "PYTHON_EXEC" : "python3 from PATH";
  std::string wanted = flag ? *flag : exec != nullptr ? *exec : "python3";
  std::string found = find_on_path(wanted, path != nullptr ? *path : "");
  if (found.empty()) {
    std::string what = source == "python3 from PATH"
                           ? fmt::format("python3 is not on PATH ({})", path != nullptr ? *path : "unset")
                           : fmt::format("{}{} is not an executable file{}", source == "PYTHON_EXEC" ? "PYTHON_EXEC=" : "",
                                         wanted, wanted.find('/') == std::string::npos ? " on PATH" : "");
    throw SpecError(kCommandLine, {{source == "PYTHON_EXEC" ? "PYTHON_EXEC" : "--python",
                                    what + "; give the interpreter with --python PATH (or PYTHON_EXEC), or "
                                           "--no-python to run the program itself"}});
  }
  return {found, source};
}

bool is_python_command(const std::string& word) {
  std::string base = fs::path(word).filename().string();
  if (base.rfind("python", 0) != 0) return false;
  std::string_view v = std::string_view(base).substr(6);  // "", "3", "3.11"
  bool dot = false;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '.' && i > 0 && !dot && i + 1 < v.size()) dot = true;
    else if (v[i] < '0' || v[i] > '9') return false;
  }
  return true;
}

std::optional<ProgramCommand> retarget_python(JobSpec& spec, const std::optional<std::string>& flag,
                                              const Environment& env) {
  if (spec.command.empty()) return std::nullopt;
  const std::string* exec = env.get("PYTHON_EXEC");
  bool chosen = flag || (exec != nullptr && !exec->empty());
  if (!is_python_command(spec.command.front())) {
    if (flag)
      throw SpecError(kCommandLine, {{"--python", fmt::format("names the interpreter of a Python command, but the job's "
                                                              "command starts with {}; drop --python, or make the "
                                                              "command [\"python3\", ...]", spec.command.front())}});
    return std::nullopt;
  }
  ProgramCommand out;
  if (chosen) {
    std::tie(out.python, out.python_source) = find_python(flag, env);
    spec.command.front() = out.python;
  } else {
    const std::string* path = env.get("PATH");
    out.python = find_on_path(spec.command.front(), path != nullptr ? *path : "");
    if (out.python.empty()) out.python = spec.command.front();  // check_command names what is missing
    out.python_source = "the job's command";
  }
  out.command = spec.command;
  return out;
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
  auto [python, source] = find_python(p.python, env);
  out.python = python;
  out.python_source = source;
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
