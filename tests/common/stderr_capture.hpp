#pragma once
// The test process's stderr in a file while alive: what dtrain logs (one write(2) a line, from any
// thread) can be read back with text().
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace dtrain::test {

struct StderrCapture {
  std::string path;
  int saved = -1;
  explicit StderrCapture(const std::string& stem = "dtrain-stderr")
      : path((std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(::getpid()) + ".log")).string()) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    std::fflush(stderr);
    saved = ::dup(2);
    ::dup2(fd, 2);
    ::close(fd);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  std::string text() const {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  ~StderrCapture() {
    ::dup2(saved, 2);
    ::close(saved);
    ::unlink(path.c_str());
  }
};

}  // namespace dtrain::test
