// Real multi-process runs through `dtrain launch`: the C worker (examples/c_allreduce) on the
// shared-memory and TCP engines and, with two agents on loopback, the hierarchical engine; a rank
// SIGKILLed mid-allreduce (the others fail within their
// deadline with an error naming it), and no /dev/shm residue after the whole job is SIGKILLed;
// shared-memory segments: mode 0600, swept by the agent when a worker dies during setup and by the
// guardian when the agent is SIGKILLed then, and two jobs of the same name at once never collide.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../cli/run_binary.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/progress_page.hpp"
#include "launch_env.hpp"
#include "ranks.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"

extern char** environ;

namespace {

using dtrain::coll::test::env_for;
using dtrain::coll::test::wait_until;
using dtrain::test::TempDir;

std::string job(const std::string& run_id, int ranks, const std::vector<std::string>& args) {
  std::string cmd = std::string("\"") + C_WORKER + "\"";
  for (const auto& a : args) cmd += ", \"" + a + "\"";
  return "{ \"version\": 1, \"name\": \"coll\", \"command\": [" + cmd + "],\n  \"cluster\": { \"instances\": 1, " +
         "\"procs_per_instance\": " + std::to_string(ranks) + " },\n  \"rendezvous\": { \"run_id\": \"" + run_id +
         "\" } }\n";
}

// The /dev/shm entries whose names contain `needle`.
std::vector<std::string> shm_names_with(const std::string& needle) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d))
      if (std::strstr(e->d_name, needle.c_str()) != nullptr) out.emplace_back(e->d_name);
    ::closedir(d);
  }
  return out;
}
std::size_t shm_entries(const std::string& needle) { return shm_names_with(needle).size(); }

// Waits up to timeout_s for no /dev/shm entry to contain `needle`; returns how many are left.
std::size_t shm_left(const std::string& needle, double timeout_s) {
  wait_until([&] { return shm_entries(needle) == 0; }, std::chrono::milliseconds(static_cast<int>(timeout_s * 1000)));
  return shm_entries(needle);
}

// The calls each of `ranks` ranks has made so far, from the progress pages in the run folder (-1
// for a rank whose page is not written yet).
std::vector<long> calls_made(const std::filesystem::path& run_folder, int ranks) {
  std::vector<long> out;
  for (int r = 0; r < ranks; ++r) {
    long calls = -1;
    const int fd = ::open((run_folder / ("progress-" + std::to_string(r))).c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd >= 0 && (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(dtrain::progress::kPageBytes))) {
      ::close(fd);  // not a whole page (a reader must not map past the end of a file)
    } else if (fd >= 0) {
      void* m = ::mmap(nullptr, dtrain::progress::kPageBytes, PROT_READ, MAP_SHARED, fd, 0);
      ::close(fd);
      if (m != MAP_FAILED) {
        const auto snap = dtrain::progress::read(*static_cast<const dtrain::progress::Page*>(m));
        if (snap.valid) calls = static_cast<long>(snap.calls);
        ::munmap(m, dtrain::progress::kPageBytes);
      }
    }
    out.push_back(calls);
  }
  return out;
}

// A job whose ranks run `sh -c script` (no double quotes in it); W in its env is the C worker.
std::string sh_job(const std::string& run_id, int ranks, const std::string& script) {
  return std::string("{ \"version\": 1, \"name\": \"coll\", \"command\": [\"sh\", \"-c\", \"") + script +
         "\"],\n  \"env\": { \"W\": \"" + C_WORKER + "\" },\n  \"cluster\": { \"instances\": 1, " +
         "\"procs_per_instance\": " + std::to_string(ranks) + " },\n  \"rendezvous\": { \"run_id\": \"" + run_id +
         "\" } }\n";
}

// Starts `dtrain launch [flags] spec` with its output to /dev/null; returns its pid.
pid_t spawn_launch(const std::string& spec, const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args = {DTRAIN_BIN, "launch"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(spec);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, DTRAIN_BIN, &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int free_port() { return dtrain::net::pick_free_port("127.0.0.1"); }

// A shared-memory job of the C worker whose rank 1 SIGKILLs itself as `args` say (the survivors
// ignore the agent's SIGTERM long enough to report), with a 15 s collective deadline.
struct Killed {
  int status = 0;
  std::string all;  // stdout + stderr
  std::chrono::steady_clock::duration took{};
};
Killed run_killed(const std::string& id, int ranks, std::vector<std::string> args) {
  for (const char* a : {"--die-rank", "1", "--ignore-sigterm"}) args.emplace_back(a);
  TempDir dir;
  auto spec = dir.write("job.json", job(id, ranks, args));
  auto env = env_for("auto", "15");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = dtrain::test::run({DTRAIN_BIN, "launch", "--grace", "20", spec}, env, 120);
  return {r.status, r.out + r.err, std::chrono::steady_clock::now() - t0};
}

std::string run_id(const char* what) { return std::string("coll-") + what + "-" + std::to_string(::getpid()); }

}  // namespace

TEST_SUITE("collectives::launch") {
  TEST_CASE("a C worker allreduces correct results on both engines") {
    for (auto [transport, ranks, engine] : {std::tuple{"auto", 4, "shm engine"}, std::tuple{"tcp", 3, "tcp engine"}}) {
      CAPTURE(transport);
      TempDir dir;
      auto spec = dir.write("job.json", job(run_id(transport), ranks, {"--count", "100003", "--iters", "2"}));
      auto r = dtrain::test::run({DTRAIN_BIN, "launch", spec}, env_for(transport), 120);
      INFO(r.out);
      INFO(r.err);
      CHECK(r.status == 0);
      for (int k = 0; k < ranks; ++k)
        CHECK(r.out.find("rank " + std::to_string(k) + "/" + std::to_string(ranks) + " ok") != std::string::npos);
      CHECK((r.out + r.err).find(engine) != std::string::npos);
    }
  }

  TEST_CASE("two nodes of two ranks (two agents on loopback): the hierarchical engine") {
    TempDir dir;
    auto spec = dir.write("job.json", job(run_id("hier"), 2, {"--count", "100003", "--iters", "2"}));
    auto token = dir.write("token", "collectives-test-token");
    std::filesystem::permissions(token, std::filesystem::perms(0600));
    const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
    dtrain::test::Result res[2];
    std::thread nodes[2];
    for (int nr = 0; nr < 2; ++nr)
      nodes[nr] = std::thread([&, nr] {
        res[nr] = dtrain::test::run({DTRAIN_BIN, "launch", "--nodes", "2", "--node-rank", std::to_string(nr),
                                     "--nproc-per-node", "2", "--rdzv", rdzv, "--token-file", token, spec},
                                    env_for("auto"), 120);
      });
    for (auto& t : nodes) t.join();
    for (int nr = 0; nr < 2; ++nr) {
      CAPTURE(nr);
      INFO(res[nr].out);
      INFO(res[nr].err);
      CHECK(res[nr].status == 0);
      for (int k = 2 * nr; k < 2 * nr + 2; ++k)
        CHECK(res[nr].out.find("rank " + std::to_string(k) + "/4 ok") != std::string::npos);
      CHECK((res[nr].out + res[nr].err).find("hierarchical engine") != std::string::npos);
    }
  }

  TEST_CASE("a rank killed mid-allreduce: the others fail in time, naming it") {
    for (auto [transport, needle] : {std::pair{"auto", "rank 1 (pid"}, std::pair{"tcp", "rank 1 (address 127.0.0.1"}}) {
      CAPTURE(transport);
      TempDir dir;
      auto spec = dir.write("job.json", job(run_id("kill"), 3,
                                            {"--count", "300000", "--iters", "1000", "--die-rank", "1", "--die-at",
                                             "2", "--ignore-sigterm"}));
      const auto t0 = std::chrono::steady_clock::now();
      auto r = dtrain::test::run({DTRAIN_BIN, "launch", "--grace", "20", spec}, env_for(transport, "15"), 120);
      const auto took = std::chrono::steady_clock::now() - t0;
      const std::string all = r.out + r.err;
      INFO(all);
      CHECK(r.status == 137);  // the root cause: SIGKILL
      // Both survivors report a peer failure that names rank 1, well before the SIGKILL at the end
      // of the grace period would have stopped them.
      CHECK(all.find("rank 0: allreduce") != std::string::npos);
      CHECK(all.find("rank 2: allreduce") != std::string::npos);
      CHECK(all.find("peer failure (4)") != std::string::npos);
      CHECK(all.find(needle) != std::string::npos);
      CHECK(all.find("#") != std::string::npos);
      CHECK(took < std::chrono::seconds(19));
    }
  }

  TEST_CASE("a rank killed in the middle of small allreduces (shared-memory latency path): the others fail in time") {
    // 5 elements per call: every allreduce takes the latency path (no sync), whose waits check the
    // peers' liveness between sleeps; rank 1 dies a moment into iteration 3000.
    auto r = run_killed(run_id("kill-small"), 3, {"--count", "5", "--iters", "1000000", "--die-at", "3000",
                                                  "--die-after-us", "1"});
    INFO(r.all);
    CHECK((r.status == 137 || r.status == 14));
    CHECK(r.all.find("rank 0: ") != std::string::npos);
    CHECK(r.all.find("rank 2: ") != std::string::npos);
    CHECK(r.all.find("peer failure (4)") != std::string::npos);
    CHECK(r.all.find("rank 1 (pid") != std::string::npos);
    CHECK(r.took < std::chrono::seconds(19));
  }

  TEST_CASE("a rank killed during a large shared-memory allreduce (pipelined path): the other fails, not hangs") {
    // 32 MiB per call: rank 1 dies 2 ms into the call, while rank 0 streams the segment's slots with it
    // (or waits for it at the call's end); either way rank 0 reports a peer failure.
    auto r = run_killed(run_id("kill-copy"), 2, {"--count", "8388608", "--iters", "3", "--die-at", "1",
                                                 "--die-after-us", "2000"});
    INFO(r.all);
    // The job's status is rank 1's SIGKILL, or rank 0's peer failure (10 + 4) when the agent reaps
    // rank 0 first: it notices the death within the copy, about as soon as the agent does.
    CHECK((r.status == 137 || r.status == 14));
    CHECK(r.all.find("rank 0: allreduce") != std::string::npos);
    CHECK(r.all.find("peer failure (4)") != std::string::npos);
    CHECK(r.all.find("rank 1 (pid") != std::string::npos);
    CHECK(r.took < std::chrono::seconds(19));
  }

  TEST_CASE("no /dev/shm residue after the whole job is SIGKILLed") {
    TempDir dir;
    const std::string id = run_id("residue");
    auto spec = dir.write("job.json", job(id, 4, {"--count", "200000", "--iters", "1000000"}));
    pid_t pid = spawn_launch(spec, {"--log-dir", (dir.path / "logs").string()});
    // The workers are deep in their collectives: each has made 20 calls (its progress page says so).
    const bool busy = wait_until([&] {
      for (long c : calls_made(dir.path / "logs" / id, 4))
        if (c < 20) return false;
      return true;
    }, std::chrono::seconds(60));
    ::kill(pid, SIGKILL);
    CHECK(busy);
    int st = 0;
    ::waitpid(pid, &st, 0);
    // The guardian kills the workers with SIGKILL; the segment was unlinked right after setup.
    CHECK(shm_left("dtrain-" + id, 5) == 0);
  }

  TEST_CASE("a rank that fails during setup leaves no segment: the agent sweeps it; segments are 0600") {
    TempDir dir;
    const std::string id = run_id("sweep");
    // Rank 0 creates the segment and waits for rank 3 to map it, which exits instead once the test
    // has looked at the segment (the file `go`); the agent then stops ranks 0-2 with SIGTERM, which
    // leaves the segment's name in /dev/shm.
    const std::string go = (dir.path / "go").string();
    auto spec = dir.write("job.json", sh_job(id, 4, "if [ $RANK = 3 ]; then while [ ! -e " + go +
                                                        " ]; do sleep 0.01; done; exit 3; fi; exec $W --iters 2"));
    pid_t pid = spawn_launch(spec);
    std::vector<std::string> seen;
    wait_until([&] { return !(seen = shm_names_with("-" + id + "-g0-")).empty(); }, std::chrono::seconds(60));
    dir.write("go", "");
    REQUIRE(seen.size() == 1);
    struct stat st {};
    REQUIRE(::stat(("/dev/shm/" + seen[0]).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == ::geteuid());
    CHECK(seen[0].rfind("dtrain-", 0) == 0);  // the agent's stem (DTRAIN_SHM_PREFIX) first
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 3);
    CHECK(shm_entries("-" + id + "-") == 0);  // swept when the generation ended, not later
  }

  TEST_CASE("the whole agent SIGKILLed while a segment waits for its ranks: the guardian sweeps it") {
    TempDir dir;
    const std::string id = run_id("guard");
    // Rank 2 never attaches: it hangs (no synchronisation: the guardian kills it with the others).
    auto spec = dir.write("job.json", sh_job(id, 3, "if [ $RANK = 2 ]; then sleep 60; fi; exec $W --iters 2"));
    pid_t pid = spawn_launch(spec);
    std::size_t seen = 0;
    wait_until([&] { return (seen = shm_entries("-" + id + "-g0-")) != 0; }, std::chrono::seconds(60));
    CHECK(seen == 1);
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    CHECK(shm_left("-" + id + "-", 5) == 0);
  }

  TEST_CASE("two jobs of the same name and run id on one machine at once do not collide") {
    TempDir dir;
    auto spec = dir.write("job.json", job(run_id("twin"), 4, {"--count", "100003", "--iters", "20"}));
    dtrain::test::Result res[2];
    std::thread jobs[2];
    for (int k = 0; k < 2; ++k)
      jobs[k] = std::thread([&, k] { res[k] = dtrain::test::run({DTRAIN_BIN, "launch", spec}, env_for("auto"), 120); });
    for (auto& t : jobs) t.join();
    for (const auto& r : res) {
      INFO(r.out);
      INFO(r.err);
      CHECK(r.status == 0);
      for (int k = 0; k < 4; ++k) CHECK(r.out.find("rank " + std::to_string(k) + "/4 ok") != std::string::npos);
      CHECK((r.out + r.err).find("shm engine") != std::string::npos);
    }
  }
}
