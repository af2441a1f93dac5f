// The run folder's checkpoint folder (agent/src/run_folder.cpp): where it is, that it is made with
// mode 0700, and what a folder that cannot be made says.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdlib>

#include <filesystem>
#include <string>

#include "agent_test_util.hpp"
#include "dtrain/common/errors.hpp"
#include "run_folder.hpp"

namespace fs = std::filesystem;
using dtrain::agent::RunFolder;
using agent_test::TempDir;
using agent_test::write_file;

namespace {

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777u;
}

}  // namespace

TEST_SUITE("agent::run_folder") {
  TEST_CASE("unset: <run folder>/checkpoint, made 0700 and kept over calls") {
    TempDir t;
    RunFolder rf;
    rf.create((t.path / "logs").string(), "run-1");
    const fs::path dir = rf.checkpoint_dir(std::nullopt, t.path);
    CHECK(dir == rf.path() / "checkpoint");
    CHECK(dir.is_absolute());
    CHECK(fs::is_directory(dir));
    CHECK(mode_of(dir) == 0700u);
    write_file(dir / "step-1.ckpt", "x");
    CHECK(rf.checkpoint_dir(std::nullopt, t.path) == dir);  // a later generation finds it as it was
    CHECK(fs::exists(dir / "step-1.ckpt"));
  }

  TEST_CASE("a temporary run folder in memory: the checkpoint folder is a folder of its own under TMPDIR") {
    TempDir t;
    const char* old_tmp = std::getenv("TMPDIR");
    const std::string saved = old_tmp ? old_tmp : "";
    ::setenv("TMPDIR", t.path.c_str(), 1);
    fs::path run, ckpt;
    {
      RunFolder rf;
      rf.create("", "run-2");
      run = rf.path();
      ckpt = rf.checkpoint_dir(std::nullopt, t.path);
      CHECK(fs::is_directory(run));
      CHECK(fs::is_directory(ckpt));
      CHECK(mode_of(ckpt) == 0700u);
      CHECK(rf.checkpoint_dir(std::nullopt, t.path) == ckpt);  // one folder for the whole launch
      if (run.parent_path() != t.path) {  // a file system in memory was found for the run folder
        CHECK(ckpt.parent_path() == t.path);
        CHECK(ckpt.filename().string().rfind("dtrain-run-2-checkpoint-", 0) == 0);
      } else {
        CHECK(ckpt == run / "checkpoint");
      }
      write_file(ckpt / "step-1.ckpt", "x");
    }
    CHECK_FALSE(fs::exists(run));  // both removed at the end
    CHECK_FALSE(fs::exists(ckpt));
    if (old_tmp) ::setenv("TMPDIR", saved.c_str(), 1);
    else ::unsetenv("TMPDIR");
  }

  TEST_CASE("restart.checkpoint_dir: relative to workdir, parents made; an existing folder keeps its mode") {
    TempDir t;
    RunFolder rf;
    rf.create((t.path / "logs").string(), "run-2");
    const fs::path dir = rf.checkpoint_dir(std::string("ckpt/a/"), t.path / "work");
    CHECK(dir == t.path / "work" / "ckpt" / "a");
    CHECK(mode_of(dir) == 0700u);
    fs::create_directory(t.path / "shared");
    fs::permissions(t.path / "shared", fs::perms(0755));
    CHECK(rf.checkpoint_dir((t.path / "shared").string(), t.path / "work") == t.path / "shared");
    CHECK(mode_of(t.path / "shared") == 0755u);
  }

  TEST_CASE("a folder that cannot be made is a ConfigError naming it and the field") {
    TempDir t;
    RunFolder rf;
    rf.create((t.path / "logs").string(), "run-3");
    write_file(t.path / "file", "not a folder");
    for (const std::string bad : {"file", "file/ckpt"}) {
      CAPTURE(bad);
      std::string what;
      try {
        (void)rf.checkpoint_dir(bad, t.path);
      } catch (const dtrain::ConfigError& e) {
        what = e.what();
      }
      CHECK(what.find("cannot create the checkpoint folder '" + (t.path / bad).string() + "'") != std::string::npos);
      CHECK(what.find("restart.checkpoint_dir") != std::string::npos);
    }
  }
}
