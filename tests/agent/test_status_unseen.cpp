// `dtrain status` says which ranks have no collective call on their pages (gloo or NCCL traffic
// is invisible to it) instead of implying they are idle; the hang verdict says the same.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../cli/run_binary.hpp"
#include "../multinode/multinode_util.hpp"
#include "agent_test_util.hpp"
#include "dtrain/agent/hang.hpp"

using namespace agent_test;
using namespace dtrain::agent;
namespace pg = dtrain::progress;

namespace {

constexpr std::int64_t kS = 1000000000;

RankProgress in_call(int rank, std::uint64_t seq, std::int64_t begin) {
  RankProgress r{rank, {}};
  r.page.valid = true;
  r.page.op = static_cast<std::uint32_t>(pg::Op::allreduce);
  r.page.seq = seq;
  r.page.calls = seq;
  r.page.bytes = 64;
  r.page.begin_ns = begin;
  return r;
}

// `dtrain ARGS...`, stdout captured; its exit status.
int run_dtrain(const TempDir& t, std::vector<std::string> args, std::string& out) {
  args.insert(args.begin(), DTRAIN_BIN);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int o = ::open((t / "status.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  int rc = wait_child(pid, 30);
  out = slurp(t.path / "status.out");
  return rc;
}

}  // namespace

TEST_SUITE("agent::status_unseen") {
  TEST_CASE("ranks without a dtrain collective call are named as unseen, not as idle") {
    std::int64_t now = 100 * kS;
    auto d = diagnose({in_call(0, 3, now - kS), RankProgress{1, {}}, RankProgress{2, {}}}, now, 10);
    CHECK(d.unseen == std::vector<int>{1, 2});
    CHECK(d.lines[1] == "rank 1: unseen (no dtrain collective call yet)");
    CHECK(unseen_text(d) == "ranks 1-2: no collective call on their progress pages yet (calls of dtrain's collectives "
                            "and of torch.distributed in Python show there; other traffic does not): `dtrain status "
                            "--stacks` shows where they are");
    CHECK(diagnosis_text(d).find("\n" + unseen_text(d)) != std::string::npos);
    auto all = diagnose({in_call(0, 3, now - kS)}, now, 10);
    CHECK(all.unseen.empty());
    CHECK(unseen_text(all).empty());
    CHECK(diagnosis_text(all) == "rank 0: in allreduce #3 (64 B) for 1.0 s");
    auto one = diagnose({RankProgress{4, {}}}, now, 10);
    CHECK(unseen_text(one).rfind("rank 4: no collective call on its progress page yet (", 0) == 0);
    CHECK(unseen_text(one).find("shows where it is") != std::string::npos);
  }

  TEST_CASE("dtrain status on a job whose workers never call dtrain's collectives") {
    TempDir t;
    std::string run_id = "unseen-" + unique_marker();
    write_file(t.path / "job.json",
               fmt::format(R"({{"command": ["sleep", "30"], "cluster": {{"procs_per_instance": 2}},
                               "rendezvous": {{"run_id": "{}"}}}})", run_id));
    pid_t job = ::fork();
    if (job == 0) {
      int n = ::open("/dev/null", O_RDWR);
      ::dup2(n, 0), ::dup2(n, 1), ::dup2(n, 2);
      ::execl(DTRAIN_BIN, DTRAIN_BIN, "launch", (t / "job.json").c_str(), "--no-progress", nullptr);
      _exit(127);
    }
    std::string out;
    bool seen = wait_until([&] {
      return run_dtrain(t, {"status", "--run-id", run_id}, out) == 0 && out.find("rank 1:") != std::string::npos;
    }, 30);
    CHECK_MESSAGE(seen, out);
    CHECK(out.find("  rank 0: unseen (no dtrain collective call yet)\n") != std::string::npos);
    CHECK(out.find("  ranks 0-1: no collective call on their progress pages yet (") != std::string::npos);
    CHECK(out.find("cannot see") == std::string::npos);
    CHECK(out.find("no collective call yet") == std::string::npos);  // never the words that meant "idle"
    REQUIRE(run_dtrain(t, {"status", "--run-id", run_id, "--json"}, out) == 0);
    auto j = nlohmann::json::parse(out, nullptr, false);
    REQUIRE(j.is_object());
    REQUIRE(j["runs"].size() == 1);
    CHECK(j["runs"][0]["unseen_ranks"] == nlohmann::json::array({0, 1}));
    ::kill(job, SIGTERM);
    CHECK(wait_child(job, 30) == 143);
  }

  TEST_CASE("dtrain status --rdzv: each node names the ranks with no call on their pages") {
    mn::Job j(2, 1, "exec sleep 60");
    mn::Node n0 = j.node(0), n1 = j.node(1);
    std::string out;
    bool seen = wait_until([&] {
      out = dtrain::test::run({DTRAIN_BIN, "status", "--rdzv", fmt::format("127.0.0.1:{}", j.port), "--token-file",
                               j.t / "token"}).out;
      return out.find("rank 1: unseen (no dtrain collective call yet)") != std::string::npos &&
             out.find("rank 0: unseen (no dtrain collective call yet)") != std::string::npos;
    }, 30);
    CHECK_MESSAGE(seen, out);
    CHECK_MESSAGE(out.find("  rank 0: no collective call on its progress page yet (") != std::string::npos, out);
    CHECK_MESSAGE(out.find("  rank 1: no collective call on its progress page yet (") != std::string::npos, out);
    ::kill(n0.pid, SIGTERM);
    CHECK(mn::finish(n0, 30) == 143);
    CHECK(mn::finish(n1, 30) == 143);
    CHECK(j.no_workers_left());
  }
}
