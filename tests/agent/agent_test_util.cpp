#include "agent_test_util.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace agent_test {

TempDir::TempDir() {
  std::string templ = (fs::temp_directory_path() / "dtrain-agent-test-XXXXXX").string();
  std::vector<char> b(templ.begin(), templ.end());
  b.push_back('\0');
  if (::mkdtemp(b.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path = b.data();
}

TempDir::~TempDir() {
  if (std::getenv("DTRAIN_TEST_KEEP") != nullptr) return;
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto nl = text.find('\n', start);
    if (nl == std::string::npos) {
      out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

void write_file(const fs::path& p, const std::string& text, bool executable) {
  {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
  }
  fs::permissions(p, executable ? fs::perms(0755) : fs::perms(0644));
}

bool all_files(const TempDir& t, const std::string& prefix, int n) {
  for (int r = 0; r < n; ++r)
    if (!fs::exists(t / (prefix + std::to_string(r)))) return false;
  return true;
}

dtrain::config::Plan sh_plan(int n, const std::string& script, const TempDir& t) {
  dtrain::config::Plan p;
  p.spec.command = {"/bin/sh", "-c", script};
  p.spec.env["T"] = t.path.string();
  p.world_size = n;
  p.instances = 1;
  p.procs_per_instance = n;
  for (int r = 0; r < n; ++r) p.ranks.push_back({r, 0, r});
  p.run_id = "test-run";
  p.identity.master_addr = "127.0.0.1";
  return p;
}

dtrain::agent::AgentOptions options(dtrain::config::Plan plan, const TempDir&) {
  dtrain::agent::AgentOptions o;
  o.plan = std::move(plan);
  o.self_exe = DTRAIN_BIN;
  o.plan.spec.grace_s = 5;
  o.progress = 0;
  return o;
}

Run run_agent(dtrain::agent::AgentOptions opt, const TempDir& t) {
  int out = ::open((t.path / "agent.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = ::open((t.path / "agent.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  opt.output.stdout_fd = out;
  opt.output.stderr_fd = err;
  Run r;
  {
    dtrain::agent::Agent a(std::move(opt));
    r.rc = a.run();
    r.result = a.result();
  }
  ::close(out);
  ::close(err);
  r.out = slurp(t.path / "agent.out");
  r.err = slurp(t.path / "agent.err");
  return r;
}

pid_t fork_agent(dtrain::agent::AgentOptions opt, const TempDir& t) {
  std::string out_path = (t.path / "agent.out").string(), err_path = (t.path / "agent.err").string();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  opt.output.stdout_fd = out;
  opt.output.stderr_fd = err;
  int rc = 125;
  try {
    dtrain::agent::Agent a(std::move(opt));
    rc = a.run();
  } catch (...) {
  }
  _exit(rc);
}

int wait_child(pid_t pid, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

bool wait_until(const std::function<bool()>& cond, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

std::vector<pid_t> procs_with_env(const std::string& needle) {
  std::vector<pid_t> out;
  pid_t self = ::getpid();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == self || !pid_alive(pid)) continue;
    std::string env = slurp(e.path() / "environ");
    if (env.find(needle) != std::string::npos) out.push_back(pid);
  }
  return out;
}

bool pid_alive(pid_t pid) {
  std::string stat = slurp(fs::path("/proc") / std::to_string(pid) / "stat");
  if (stat.empty()) return false;
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  char st = stat[close + 2];
  return st != 'Z' && st != 'X';
}

std::string unique_marker() {
  static std::atomic<int> n{0};
  return "dtrain_test_marker_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + "_" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

}  // namespace agent_test
