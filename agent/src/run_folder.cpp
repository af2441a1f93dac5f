// The run folder (run_folder.hpp).
#include "run_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "dtrain/agent/output.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

RunFolder::~RunFolder() {
  if (temporary_ && !path_.empty()) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
}

void RunFolder::create(const std::string& log_dir, const std::string& run_id, bool keep) {
  if (!log_dir.empty()) {
    std::error_code ec;
    path_ = fs::absolute(fs::path(log_dir) / run_id, ec);
    fs::create_directories(path_, ec);
    if (ec && is_resource_errno(ec.value())) throw_os_error(ec.value(), fmt::format("cannot create the log folder '{}'", path_.string()));
    if (ec)
      throw ConfigError(fmt::format("cannot create the log folder '{}': {} (fix output.log_dir or --log-dir)",
                                    path_.string(), ec.message()));
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = fmt::format("{}/dtrain-{}-XXXXXX", tmp && *tmp ? tmp : "/tmp", run_id);
  std::vector<char> b(templ.begin(), templ.end());
  b.push_back('\0');
  if (::mkdtemp(b.data()) == nullptr) throw_os_error(errno, fmt::format("cannot create the run folder {}", templ));
  path_ = b.data();
  temporary_ = !keep;
}

void RunFolder::write_plan(const std::string& json) const {
  fs::path p = plan_path();
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_os_error(errno, fmt::format("cannot write {}", p.string()));
  bool ok = write_all(fd, json.empty() ? std::string_view("{}\n") : std::string_view(json));
  if (ok && (json.empty() || json.back() != '\n')) ok = write_all(fd, "\n");
  int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(p.c_str());
    throw_os_error(err, fmt::format("cannot write {}", p.string()));
  }
}

fs::path RunFolder::checkpoint_dir(const std::optional<std::string>& spec_dir, const fs::path& workdir) const {
  std::error_code ec;
  fs::path dir = (spec_dir ? fs::absolute(workdir / *spec_dir, ec) : path_ / "checkpoint").lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "ckpt/"
  int err = ec.value();
  if (!err && !fs::is_directory(dir, ec)) {
    fs::create_directories(dir.parent_path(), ec);
    err = ec.value();
    if (!err && ::mkdir(dir.c_str(), 0700) != 0) {
      err = errno;
      if (err == EEXIST && fs::is_directory(dir, ec)) err = 0;  // made by someone else meanwhile
    }
  }
  if (!err) return dir;
  if (!spec_dir || is_resource_errno(err)) throw_os_error(err, fmt::format("cannot create the checkpoint folder '{}'", dir.string()));
  throw ConfigError(fmt::format("cannot create the checkpoint folder '{}': {} (fix restart.checkpoint_dir in the job spec)",
                                dir.string(), errno_text(err)));
}

std::optional<fs::path> RunFolder::attempt(int generation) const {
  if (temporary_) return std::nullopt;
  fs::path dir = path_ / fmt::format("attempt-{}", generation);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_os_error(ec.value(), fmt::format("cannot create {}", dir.string()));
  return dir;
}

}  // namespace dtrain::agent
