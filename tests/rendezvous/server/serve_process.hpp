#pragma once
// Test helpers for the real binary: `dtrain ARGS` run to its end, and `dtrain rendezvous serve` in
// the background (its port read from the "serving on" line, its stderr kept in a file), with the
// resident memory and open descriptors of a process read from /proc.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace rt {

struct Cmd {
  int status = -1;
  std::string out;
};

// Runs DTRAIN_BIN with args (shell-quoted by the caller), stdout+stderr captured.
inline Cmd run_dtrain(const std::string& args) {
  Cmd c;
  std::string line = std::string(DTRAIN_BIN) + " " + args + " 2>&1";
  FILE* p = ::popen(line.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) c.out.append(buf, n);
  int st = ::pclose(p);
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return c;
}

// `dtrain rendezvous serve` in the background; reads the "serving on" line for the port. With
// `stderr_path` its stderr goes there; with `nofile` > 0 it runs under that open-files limit.
struct ServeProcess {
  pid_t pid = -1;
  int out_fd = -1;
  int port = 0;
  std::string first_line;
  explicit ServeProcess(std::vector<std::string> args, const std::string& stderr_path = {}, long nofile = 0) {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(p[1], 1);
      if (!stderr_path.empty()) {
        int fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) ::dup2(fd, 2);
      }
      if (nofile > 0) {
        rlimit r{rlim_t(nofile), rlim_t(nofile)};
        ::setrlimit(RLIMIT_NOFILE, &r);
      }
      std::vector<char*> argv;
      std::string bin = DTRAIN_BIN;
      argv.push_back(bin.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(p[1]);
    out_fd = p[0];
    char ch;
    while (::read(out_fd, &ch, 1) == 1 && ch != '\n') first_line += ch;
    auto colon = first_line.rfind(':');
    auto space = first_line.find(' ', colon);
    if (colon != std::string::npos) port = std::atoi(first_line.substr(colon + 1, space - colon - 1).c_str());
  }
  int stop(int sig = SIGTERM) {
    ::kill(pid, sig);
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ~ServeProcess() {
    if (pid > 0) stop(SIGKILL);
    if (out_fd >= 0) ::close(out_fd);
  }
};

// Resident memory of a process in KiB (VmRSS), 0 when it is gone.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

// Open file descriptors of a process.
inline int fd_count(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

}  // namespace rt
