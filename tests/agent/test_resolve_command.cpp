// Command resolution before anything is spawned: what execvp would find, and why not.
#include <doctest/doctest.h>

#include "agent_test_util.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "resolve_command.hpp"

using namespace agent_test;
using dtrain::agent::resolve_command;
namespace exit_code = dtrain::exit_code;

TEST_SUITE("agent::resolve_command") {
  TEST_CASE("names along PATH, paths relative to the workdir") {
    TempDir t;
    for (const char* d : {"bin", "other", "dir"}) fs::create_directories(t.path / d);
    write_file(t.path / "bin" / "tool", "#!/bin/sh\n", true);
    write_file(t.path / "other" / "tool", "#!/bin/sh\n", false);
    write_file(t.path / "plain.txt", "x\n", false);

    CHECK(resolve_command("sh", "/usr/bin:/bin", t.path).code == 0);
    CHECK(resolve_command("tool", "bin", t.path).code == 0);               // relative PATH entry
    CHECK(resolve_command("tool", "other:bin", t.path).code == 0);         // an executable match wins
    CHECK(resolve_command("./bin/tool", "", t.path).code == 0);
    CHECK(resolve_command((t.path / "bin" / "tool").string(), "", "/").code == 0);

    struct Row {
      std::string cmd, path;
      int code;
      std::string says;
    };
    const Row rows[] = {
        {"", "/bin", exit_code::usage, "the job's command is empty"},
        {"dtrain-no-such-tool", "/bin:bin", exit_code::not_found, "command not found: 'dtrain-no-such-tool' (searched PATH=/bin:bin)"},
        {"./missing", "", exit_code::not_found, "(no such file)"},
        {"tool", "other", exit_code::not_executable, "is not executable (chmod +x it"},
        {"./plain.txt", "", exit_code::not_executable, "is not executable"},
        {"./dir", "", exit_code::not_executable, "is a directory, not a program"},
    };
    for (const auto& row : rows) {
      CAPTURE(row.cmd);
      auto r = resolve_command(row.cmd, row.path, t.path);
      CHECK(r.code == row.code);
      CHECK(r.message.find(row.says) != std::string::npos);
    }
  }

  TEST_CASE("the guardian program: dtrain-shim next to the binary, else the binary's own entry points") {
    TempDir t;
    fs::create_directories(t.path / "bin");
    fs::create_directories(t.path / "libexec" / "dtrain");
    write_file(t.path / "bin" / "dtrain", "", true);
    auto self = dtrain::agent::find_guardian_program((t.path / "bin" / "dtrain").string(), "");
    CHECK(self.exe == (t.path / "bin" / "dtrain").string());
    CHECK(self.guard_word == "__guard");

    write_file(t.path / "libexec" / "dtrain" / "dtrain-shim", "", true);
    auto libexec = dtrain::agent::find_guardian_program((t.path / "bin" / "dtrain").string(), "");
    CHECK(fs::equivalent(libexec.exe, t.path / "libexec" / "dtrain" / "dtrain-shim"));
    CHECK(libexec.guard_word == "guard");
    CHECK(dtrain::agent::find_guardian_program((t.path / "bin" / "dtrain").string(), "self").guard_word == "__guard");
    CHECK(dtrain::agent::find_guardian_program("/x/dtrain", "/opt/shim").exe == "/opt/shim");
  }
}
