// Whether the shared-memory engine sees a local rank's process as alive (engine/shm/liveness.hpp),
// with real processes: a peer that exited but was never waited for (a zombie) is dead at once, and
// a peer in another PID namespace sharing /dev/shm is neither declared dead while it is alive nor
// kept alive after it died (the suite collectives::shm::pidns, which needs root to unshare the PID
// namespace: ctest runs it as test_collectives_shm_pidns, skipped elsewhere).
#include <doctest/doctest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "shm_ranks.hpp"
#include "test_needs.hpp"

using namespace dtrain::coll;
using namespace dtrain::coll::test;
using namespace std::chrono_literals;

namespace {

// Whether this process may give a child a PID namespace of its own (root, or CAP_SYS_ADMIN).
std::string pidns_missing() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(::unshare(CLONE_NEWPID) == 0 ? 0 : 1);
  int status = 0;
  if (p < 0 || ::waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "cannot unshare the PID namespace (needs root or CAP_SYS_ADMIN)";
  return "";
}
const dtrain::test::Need need_pidns("pidns", pidns_missing);

// Local rank 0 of a group of two in this process, local rank 1 in a child process: `child` runs
// there as rank 1 once the segment is mapped, in a PID namespace of its own when `new_pidns` (its
// pid there is 1), and its return value is the child's exit status. Returns the child's pid (with
// new_pidns: of the process that waits for it in the parent's namespace); rank 0 is ready in `rank`.
pid_t fork_peer(const LocalGroup& g, std::unique_ptr<LocalRank>& rank, bool new_pidns,
                const std::function<int(LocalRank&)>& child) {
  auto store = dtrain::rdzv::make_memory_store();
  std::string error;
  std::thread creator([&] {
    try {
      rank = std::make_unique<LocalRank>(g, 0, store.get());
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  const auto name = store->get("unit/shm/name", 10s);  // published before rank 0 waits for rank 1
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (new_pidns) {
      if (::unshare(CLONE_NEWPID) != 0) ::_exit(90);
      const pid_t inner = ::fork();  // the first child in the new namespace: pid 1 there
      if (inner != 0) {
        int status = 0;
        ::_exit(inner > 0 && ::waitpid(inner, &status, 0) == inner && WIFEXITED(status) ? WEXITSTATUS(status) : 91);
      }
    }
    int rc = 92;
    try {
      auto own = dtrain::rdzv::make_memory_store();
      own->set("unit/shm/name", name);
      LocalRank mine(g, 1, own.get());
      rc = child(mine);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank 1 (child): %s\n", e.what());
    }
    ::_exit(rc);
  }
  creator.join();
  REQUIRE_MESSAGE(error.empty(), error);
  REQUIRE(pid > 0);
  return pid;
}

int exit_status(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Rank 0's barrier: what it threw ("" when it passed) and its status.
std::pair<dtrain_status_t, std::string> barrier_of(LocalRank& rank, std::chrono::milliseconds timeout) {
  const OpDesc d = op_desc(1, OpKind::barrier, 0, DTRAIN_UINT8, timeout);
  rank.peers.begin(d);
  return run_call(rank, [&] { rank.barrier.sync(d); });
}

// The child exits without a word to its peers, as a crash does; its parent waits for it only later.
void dies_unannounced(bool new_pidns) {
  LocalGroup g;
  g.name_prefix = "dtrain-liveness-" + std::to_string(::getpid());
  g.timeout = 20s;  // what the peer's death must come well before
  std::unique_ptr<LocalRank> rank;
  const pid_t pid = fork_peer(g, rank, new_pidns, [](LocalRank&) -> int { ::_exit(0); });
  const auto t0 = std::chrono::steady_clock::now();
  const auto [st, text] = barrier_of(*rank, g.timeout);
  CHECK_MESSAGE(st == DTRAIN_ERR_PEER, text);
  CHECK_MESSAGE(text.find("rank 1 (pid ") != std::string::npos, text);
  CHECK_MESSAGE(text.find(") died") != std::string::npos, text);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);  // learnt from its death, not the deadline
  CHECK(exit_status(pid) == 0);
}

}  // namespace

TEST_SUITE("collectives::shm::liveness") {
  TEST_CASE("a peer that exited and was never waited for (a zombie) is dead at once") {
    dies_unannounced(false);
  }
}

TEST_SUITE("collectives::shm::pidns") {
  TEST_CASE("a peer in another PID namespace that dies is dead at once, not alive behind another process's pid") {
    dies_unannounced(true);
  }

  TEST_CASE("a live peer in another PID namespace is waited for, not declared dead") {
    LocalGroup g;
    g.name_prefix = "dtrain-liveness-" + std::to_string(::getpid());
    g.timeout = 20s;
    std::unique_ptr<LocalRank> rank;
    // Rank 1, whose pid namespace does not hold rank 0's pid, waits in the barrier: it checks rank 0's
    // liveness before every sleep. Rank 0 arrives once rank 1 sleeps there.
    const pid_t pid = fork_peer(g, rank, true, [&](LocalRank& mine) {
      const auto [st, text] = barrier_of(mine, g.timeout);
      if (st == DTRAIN_SUCCESS) return 0;
      std::fprintf(stderr, "rank 1 (in its own PID namespace): %s\n", text.c_str());
      return 1;
    });
    CHECK(wait_until([&] { return rank->segment.header().sleepers.load() != 0; }, 10s));
    const auto [st, text] = barrier_of(*rank, g.timeout);
    CHECK_MESSAGE(st == DTRAIN_SUCCESS, text);
    CHECK(exit_status(pid) == 0);
  }
}
