// The NCCL unique-id exchange through the real launcher: `dtrain launch` runs nccl_id_worker ranks
// that bootstrap through the rendezvous store with real ncclGetUniqueId (no GPU needed); and, on a
// machine without a GPU, full communicator init under the launcher fails fast and clearly.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../cli/run_binary.hpp"
#include "nccl_core.hpp"

namespace fs = std::filesystem;

namespace {

// Fails the test unless `dtrain launch` is available in this build (it is part of the same tree;
// the message says what is missing rather than a confusing parse error).
bool launcher_available() {
  auto r = dtrain::test::run({DTRAIN_BIN, "launch", "--help"});
  if (r.status == 0 && r.out.find("launch") != std::string::npos) return true;
  FAIL("`dtrain launch --help` failed (status " << r.status << "): " << r.err);
  return false;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "dtrain-nccl-XXXXXX").string();
    path = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    if (keep) {
      MESSAGE("kept " << path.string());
    } else {
      fs::remove_all(path, ec);
    }
  }
  bool keep = false;
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

fs::path write_job(const TempDir& dir, int ranks, int max_restarts, const std::vector<std::string>& extra) {
  std::string cmd = json_string(NCCL_ID_WORKER) + ", " + json_string(dir.path.string());
  for (const auto& a : extra) cmd += ", " + json_string(a);
  fs::path job = dir.path / "job.json";
  std::ofstream(job) << "{ \"version\": 1, \"name\": \"nccl-id\", \"command\": [" << cmd << "],\n"
                     << "  \"cluster\": { \"instances\": 1, \"procs_per_instance\": " << ranks << " },\n"
                     << "  \"restart\": { \"max_restarts\": " << max_restarts << ", \"backoff_s\": 0 } }\n";
  return job;
}

std::string read_id(const TempDir& dir, int generation, int rank) {
  std::ifstream f(dir.path / ("gen" + std::to_string(generation) + "-rank" + std::to_string(rank) + ".hex"));
  std::string s;
  f >> s;
  return s;
}

}  // namespace

TEST_SUITE("nccl::launch") {
  TEST_CASE("every rank receives the same 128-byte NCCL unique id through the store") {
    if (!launcher_available()) return;
    TempDir dir;
    auto r = dtrain::test::run({DTRAIN_BIN, "launch", write_job(dir, 3, 0, {}).string()},
                               dtrain::test::base_env(), 120);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    dir.keep = r.status != 0;
    REQUIRE(r.status == 0);
    std::string id0 = read_id(dir, 0, 0);
    CHECK(id0.size() == 256);  // 128 bytes in hex
    for (int rank = 1; rank < 3; ++rank) CHECK(read_id(dir, 0, rank) == id0);
    CHECK(id0.find_first_not_of('0') != std::string::npos);
  }

  TEST_CASE("after a restart every rank holds a new id, never the old one") {
    if (!launcher_available()) return;
    TempDir dir;
    // Rank 1 exits 3 in generation 0 once all ids are recorded; in generation 1 rank 0 publishes
    // last, once the others said they wait on the key.
    auto job = write_job(dir, 3, 1, {"--fail-rank", "1", "--fail-generation", "0", "--root-last"});
    auto r = dtrain::test::run({DTRAIN_BIN, "launch", job.string()}, dtrain::test::base_env(), 180);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    dir.keep = r.status != 0;
    REQUIRE(r.status == 0);
    std::string old_id = read_id(dir, 0, 0);
    std::string new_id = read_id(dir, 1, 0);
    REQUIRE(old_id.size() == 256);
    REQUIRE(new_id.size() == 256);
    CHECK(new_id != old_id);
    for (int rank = 0; rank < 3; ++rank) {
      CAPTURE(rank);
      CHECK(read_id(dir, 0, rank) == old_id);
      CHECK(read_id(dir, 1, rank) == new_id);
    }
    CHECK_FALSE(fs::exists(dir.path / "gen2-rank0.hex"));
  }

  TEST_CASE("without a GPU, NCCL init under the launcher fails at once with the reason") {
    if (dtrain::coll::nccl::usable_device_count() > 0) {
      MESSAGE("this machine has a CUDA device; init is expected to work here");
      return;
    }
    if (!launcher_available()) return;
    TempDir dir;
    auto r = dtrain::test::run({DTRAIN_BIN, "launch", write_job(dir, 2, 0, {"--init"}).string()},
                               dtrain::test::base_env(), 120);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 1);  // the root-cause worker's own exit status, not a kill after a timeout
    CHECK(r.err.find("no usable CUDA device for the NCCL backend") != std::string::npos);
    CHECK(r.err.find("cudaGetDeviceCount") != std::string::npos);
    CHECK(r.err.find("after 60.0 s") == std::string::npos);
  }
}
