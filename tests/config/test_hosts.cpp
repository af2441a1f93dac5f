// The hosts of -H/--hosts and --hostfile (config/src/hosts.cpp): mpirun's and DeepSpeed's forms,
// comments, IPv6 in brackets, and what is refused with the entry or FILE:LINE at fault.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/hosts.hpp"

using namespace dtrain::config;

namespace {

std::string listed(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += h.name + (h.slots ? ":" + std::to_string(*h.slots) : "") + " ";
  return out;
}

// A hostfile of `text` in a folder of the test's own.
struct Hostfile {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("dtrain-hostfile-" + std::to_string(::getpid()) + ".txt");
  explicit Hostfile(const std::string& text) { std::ofstream(path) << text; }
  ~Hostfile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_SUITE("config::hosts") {
  TEST_CASE("-H lists: hosts in order, with or without slots, IPv6 in brackets") {
    CHECK(listed(parse_host_list("a:4,b:4")) == "a:4 b:4 ");
    CHECK(listed(parse_host_list("node-1.example.com, node_2")) == "node-1.example.com node_2 ");
    CHECK(listed(parse_host_list("[fd00::1]:2,10.0.0.2")) == "fd00::1:2 10.0.0.2 ");
  }

  TEST_CASE("a bad -H entry is refused, naming it") {
    CHECK_THROWS_WITH_AS(parse_host_list("a,,b"), doctest::Contains("an empty entry"), dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(parse_host_list("a:0"), doctest::Contains("'a:0': '0' is not a slot count"), dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(parse_host_list("a:x"), doctest::Contains("'x' is not a slot count"), dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(parse_host_list("fd00::1"), doctest::Contains("write an IPv6 address in brackets"),
                         dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(parse_host_list("a b"), doctest::Contains("'a b' is not a host name"), dtrain::ConfigError);
    CHECK_THROWS_WITH_AS(parse_host_list("a:2,b,a:2"), doctest::Contains("host 'a' is named twice"),
                         dtrain::ConfigError);
  }

  TEST_CASE("hostfiles: mpirun's and DeepSpeed's slots=N, host:N, a bare host, comments and blank lines") {
    Hostfile f("# the lab's boxes\n"
               "gpu1 slots=8\n"
               "\n"
               "gpu2 slots=8 max_slots=16   # mpirun's upper bound: dtrain never runs more\n"
               "  gpu3:8\n"
               "gpu4\n");
    CHECK(listed(read_hostfile(f.path.string())) == "gpu1:8 gpu2:8 gpu3:8 gpu4 ");
  }

  TEST_CASE("a bad hostfile line is refused with FILE:LINE") {
    const std::pair<const char*, const char*> cases[] = {
        {"a slots=4\nb slots=four\n", ":2: 'b slots=four': 'four' is not a slot count"},
        {"a\nb cpus=4\n", ":2: 'b cpus=4': 'cpus=4' is not slots=N"},
        {"a slots=2\n# b\na slots=2\n", ":3: host 'a' is named twice"},
        {"a:2 slots=2\n", ":1: 'a:2 slots=2': the slots are given twice"},
        {"# nothing\n\n", ": names no host"},
    };
    for (const auto& [text, message] : cases) {
      Hostfile f(text);
      CAPTURE(text);
      std::string expected = f.path.string() + message;
      CHECK_THROWS_WITH_AS(read_hostfile(f.path.string()), doctest::Contains(expected.c_str()), dtrain::ConfigError);
    }
    CHECK_THROWS_WITH_AS(read_hostfile("/nonexistent/hosts"), doctest::Contains("/nonexistent/hosts: cannot read"),
                         dtrain::ConfigError);
  }
}
