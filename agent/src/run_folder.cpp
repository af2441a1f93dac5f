// The run folder (run_folder.hpp).
#include "run_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

namespace {

std::string disk_temp_base() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

bool writable_dir(const char* p) {
  struct stat st {};
  return p != nullptr && *p == '/' && ::stat(p, &st) == 0 && S_ISDIR(st.st_mode) && ::access(p, W_OK | X_OK) == 0;
}

// Where a temporary run folder goes: a file system in memory when there is one ($XDG_RUNTIME_DIR,
// else /dev/shm), since it holds only small files that live as long as the launch (plan.json, the
// progress pages); creating and removing folders on a disk cost a launch milliseconds, on a file
// system that discards freed blocks at once many more. Else $TMPDIR (or /tmp).
std::string runtime_base() {
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); writable_dir(xdg)) return xdg;
  if (writable_dir("/dev/shm")) return "/dev/shm";
  return disk_temp_base();
}

// mkdtemp(<base>/<stem>XXXXXX): a new folder, mode 0700.
fs::path make_temp_dir(const std::string& base, const std::string& stem, const char* what) {
  std::string templ = fmt::format("{}/{}XXXXXX", base, stem);
  std::vector<char> b(templ.begin(), templ.end());
  b.push_back('\0');
  if (::mkdtemp(b.data()) == nullptr) throw_os_error(errno, fmt::format("cannot create the {} {}", what, templ));
  return b.data();
}

}  // namespace

RunFolder::~RunFolder() { remove(); }

void RunFolder::remove() {
  if (!temporary_) return;
  std::error_code ec;
  for (const auto& p : temporary_folders()) fs::remove_all(p, ec);
  removed_ = true;
}

std::vector<fs::path> RunFolder::temporary_folders() const {
  std::vector<fs::path> out;
  if (!temporary_ || removed_) return out;
  for (const auto* p : {&path_, &own_checkpoint_})
    if (!p->empty()) out.push_back(*p);
  return out;
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
  // kept logs can be large: on disk
  std::string base = keep ? disk_temp_base() : runtime_base();
  path_ = make_temp_dir(base, fmt::format("dtrain-{}-", run_id), "run folder");
  temporary_ = !keep;
  checkpoint_apart_ = temporary_ && base != disk_temp_base();
  run_id_ = run_id;
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

fs::path RunFolder::checkpoint_dir(const std::optional<std::string>& spec_dir, const fs::path& workdir) {
  if (!spec_dir && checkpoint_apart_) {  // checkpoints can be large: on disk, not in memory
    if (own_checkpoint_.empty())
      own_checkpoint_ = make_temp_dir(disk_temp_base(), fmt::format("dtrain-{}-checkpoint-", run_id_), "checkpoint folder");
    return own_checkpoint_;
  }
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
