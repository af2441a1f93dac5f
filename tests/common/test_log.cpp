// What a log line looks like to the user: no source file and line, except under DTRAIN_LOG=debug.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "dtrain/common/log.hpp"

namespace {

// The text `f` writes to stderr (fd 2).
template <class F>
std::string captured(F&& f) {
  char path[] = "/tmp/dtrain-log-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::unlink(path);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  f();
  ::dup2(saved, 2);
  ::close(saved);
  std::string out(4096, '\0');
  ssize_t n = ::pread(fd, out.data(), out.size(), 0);
  ::close(fd);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

}  // namespace

TEST_SUITE("common::log") {
  TEST_CASE("warnings and errors carry no source location unless the level is debug") {
    dtrain::log::set_level(dtrain::log::Level::warn);
    std::string w = captured([] { DTRAIN_WARN(agent, "cannot report the failure of rank {}", 3); });
    CHECK(w == "dtrain: warning: cannot report the failure of rank 3\n");
    std::string e = captured([] { DTRAIN_ERROR(rdzv, "lost"); });
    CHECK(e == "dtrain: error: lost\n");
    dtrain::log::set_level(dtrain::log::Level::debug);
    std::string d = captured([] { DTRAIN_WARN(agent, "x"); });
    CHECK(d.rfind("dtrain: warning: x [test_log.cpp:", 0) == 0);
    dtrain::log::set_level(dtrain::log::Level::warn);
  }
}
