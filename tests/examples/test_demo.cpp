// The built-in demo job through the real binary: `dtrain launch` with no job file runs
// dtrain-demo-worker (data-parallel SGD over the collectives library) on both CPU engines, finds it
// next to the binary or in ../libexec/dtrain/, and says what to do when it is in neither.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "../cli/run_binary.hpp"

namespace fs = std::filesystem;
using dtrain::test::base_env;
using dtrain::test::run;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dtrain-demo-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void check_demo(const dtrain::test::Result& r, int world) {
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  for (int rank = 0; rank < world; ++rank)
    CHECK(has(r.out, fmt::format("[0/{}] rank {}/{} on node 0: shard [{}, {}) of each global batch of {}", rank, rank,
                                 world, rank * 16, rank * 16 + 16, world * 16)));
  for (int e = 1; e <= 3; ++e) CHECK(has(r.out, fmt::format("[0/0] epoch {}/3: loss", e)));
  CHECK(has(r.out, fmt::format("weights identical on all {} ranks", world)));
}

}  // namespace

TEST_SUITE("examples::demo") {
  TEST_CASE("dtrain launch without a job file trains on the shared-memory engine") {
    check_demo(run({DTRAIN_BIN, "launch"}, base_env(), 120), 2);
  }

  TEST_CASE("the same demo over TCP, and with 4 ranks") {
    auto env = base_env();
    env["DTRAIN_TRANSPORT"] = "tcp";
    check_demo(run({DTRAIN_BIN, "launch"}, env, 120), 2);
    check_demo(run({DTRAIN_BIN, "launch", "--nproc-per-node", "4"}, base_env(), 120), 4);
  }

  TEST_CASE("the worker is found in ../libexec/dtrain/, and a clear error when it is nowhere") {
    TempDir t;
    fs::create_directories(t.path / "bin");
    fs::create_directories(t.path / "libexec" / "dtrain");
    fs::copy_file(DTRAIN_BIN, t.path / "bin" / "dtrain");
    // dtrain finds its helpers (dtrain-shim) next to itself or in libexec too; copy what is there.
    const fs::path build_dir = fs::path(DTRAIN_BIN).parent_path();
    if (fs::exists(build_dir / "dtrain-shim")) fs::copy_file(build_dir / "dtrain-shim", t.path / "bin" / "dtrain-shim");
    const std::string dtrain = (t.path / "bin" / "dtrain").string();

    auto missing = run({dtrain, "launch"}, base_env(), 60);
    INFO("stderr: " << missing.err);
    CHECK(missing.status == 2);
    CHECK(has(missing.err, "dtrain-demo-worker"));
    CHECK(has(missing.err, (t.path / "libexec" / "dtrain" / "dtrain-demo-worker").string()));
    CHECK(has(missing.err, "pass a job file"));

    fs::copy_file(DEMO_WORKER, t.path / "libexec" / "dtrain" / "dtrain-demo-worker");
    check_demo(run({dtrain, "launch"}, base_env(), 120), 2);
  }

  TEST_CASE("the worker outside dtrain launch says what is missing") {
    auto r = run({DEMO_WORKER}, base_env(), 30);
    CHECK(r.status == 2);
    CHECK(has(r.err, "DTRAIN_GLOBAL_BATCH is not set"));
    auto usage = run({DEMO_WORKER, "--bogus"}, base_env(), 30);
    CHECK(usage.status == 2);
    CHECK(has(usage.err, "usage:"));
  }
}
