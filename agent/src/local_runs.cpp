// The registry of the runs on this machine (hang.hpp: LocalRun), read by `dtrain status`.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "dtrain/agent/hang.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

fs::path local_runs_dir() {
  const char* base = std::getenv("XDG_RUNTIME_DIR");
  if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
  if (base == nullptr || *base == '\0') base = "/tmp";
  return fs::path(base) / fmt::format("dtrain-{}", ::getuid()) / "runs";
}

// One write of the whole entry (a reader that comes in between sees an empty file and skips it).
void add_local_run(const LocalRun& r) {
  fs::path dir = local_runs_dir();
  std::string text = fmt::format("{}\n{}\n{}\n{}\n", r.run_id, r.node_rank, r.run_dir,
                                 r.hang_timeout_s ? fmt::format("{}", *r.hang_timeout_s) : std::string("-"));
  fs::path file = dir / std::to_string(r.pid);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok && fd >= 0) ::unlink(file.c_str());
  if (!ok) DTRAIN_INFO(agent, "dtrain status will not list this run: {}: {}", dir.string(), errno_text(err));
}

void remove_local_run(pid_t pid) {
  std::error_code ec;
  fs::remove(local_runs_dir() / std::to_string(pid), ec);
}

std::vector<LocalRun> local_runs() {
  std::vector<LocalRun> out;
  std::error_code ec;
  for (fs::directory_iterator it(local_runs_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    char* endp = nullptr;
    long pid = std::strtol(name.c_str(), &endp, 10);
    if (name.empty() || *endp != '\0' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(it->path(), rm);
      continue;
    }
    LocalRun r;
    r.pid = static_cast<pid_t>(pid);
    std::ifstream in(it->path());
    std::string rank, hang;
    if (!std::getline(in, r.run_id) || !std::getline(in, rank) || !std::getline(in, r.run_dir)) continue;
    r.node_rank = std::atoi(rank.c_str());
    if (std::getline(in, hang) && hang != "-") r.hang_timeout_s = std::atof(hang.c_str());
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace dtrain::agent
