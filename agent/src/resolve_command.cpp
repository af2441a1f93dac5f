// Command resolution (resolve_command.hpp).
#include "resolve_command.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "dtrain/agent/check_command.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

namespace {

// false: nothing at p; true: r says whether it can be executed
bool check(const fs::path& p, Resolved& r) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return false;
  if (S_ISDIR(st.st_mode)) {
    r = {exit_code::not_executable, fmt::format("'{}' is a directory, not a program", p.string())};
  } else if (::access(p.c_str(), X_OK) != 0) {
    r = {exit_code::not_executable,
         fmt::format("'{}' is not executable (chmod +x it, or run it through its interpreter)", p.string())};
  } else {
    r = {};
  }
  return true;
}

}  // namespace

Resolved resolve_command(const std::string& cmd, const std::string& path_var, const fs::path& workdir) {
  if (cmd.empty()) return {exit_code::usage, "the job's command is empty"};
  if (cmd.find('/') != std::string::npos) {
    fs::path p = fs::path(cmd).is_absolute() ? fs::path(cmd) : workdir / cmd;
    Resolved r;
    if (!check(p, r)) r = {exit_code::not_found, fmt::format("command not found: '{}' (no such file)", p.string())};
    return r;
  }
  // the first executable match wins; else the first match that is not executable explains why
  bool found_non_exec = false;
  Resolved non_exec;
  std::size_t start = 0;
  while (start <= path_var.size()) {
    auto colon = path_var.find(':', start);
    std::string dir = path_var.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    fs::path p = fs::path(dir).is_absolute() ? fs::path(dir) / cmd : workdir / dir / cmd;
    Resolved one;
    if (check(p, one)) {
      if (one.code == 0) return one;
      if (!found_non_exec) non_exec = one;
      found_non_exec = true;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (found_non_exec) return non_exec;
  return {exit_code::not_found, fmt::format("command not found: '{}' (searched PATH={})", cmd, path_var)};
}

std::optional<Refusal> check_command(const config::Plan& plan) {
  const auto& spec = plan.spec;
  if (spec.command.empty() || spec.command[0].empty())
    return Refusal{exit_code::usage, "the job has no command: set \"command\" in the job spec (e.g. [\"python3\", \"train.py\"])"};
  std::error_code ec;
  fs::path workdir = fs::absolute(spec.workdir.empty() ? fs::path(".") : fs::path(spec.workdir), ec);
  if (!fs::is_directory(workdir, ec))
    return Refusal{exit_code::usage, fmt::format("workdir '{}' is not a directory: fix \"workdir\" in the job spec",
                                                 spec.workdir)};
  std::string path_var = "/usr/bin:/bin";
  if (auto it = spec.env.find("PATH"); it != spec.env.end()) path_var = it->second;
  else if (const char* p = std::getenv("PATH"); p != nullptr) path_var = p;
  Resolved r = resolve_command(spec.command[0], path_var, workdir);
  if (r.code == 0) return std::nullopt;
  return Refusal{r.code, r.message};
}

GuardianProgram find_guardian_program(const std::string& self_exe, const std::string& shim) {
  GuardianProgram h;
  h.exe = self_exe;
  if (h.exe.empty()) {
    char buf[4096];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw IoError(fmt::format("readlink /proc/self/exe: {}", errno_text(errno)));
    h.exe.assign(buf, static_cast<std::size_t>(n));
  }
  auto use_shim = [&](std::string exe) {
    h.exe = std::move(exe);
    h.guard_word = "guard";
  };
  if (shim.empty()) {
    fs::path dir = fs::path(h.exe).parent_path();
    for (const fs::path& c : {dir / "dtrain-shim", dir / ".." / "libexec" / "dtrain" / "dtrain-shim"}) {
      if (::access(c.c_str(), X_OK) == 0) {
        use_shim(c.string());
        break;
      }
    }
  } else if (shim != "self") {
    use_shim(shim);
  }
  return h;
}

}  // namespace dtrain::agent
