// The watch over the ranks' progress pages (agent/src/progress_watch.cpp): what it publishes, when
// a wait in one collective is a hang, and that it checks only while workers run and someone reads.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agent_test_util.hpp"
#include "dtrain/common/progress_page.hpp"
#include "progress_board.hpp"
#include "progress_watch.hpp"

using dtrain::agent::ProgressBoard;
using dtrain::agent::ProgressWatch;
namespace pg = dtrain::progress;

namespace {

constexpr std::int64_t kS = 1000000000;

// A worker's side of a page: mapped, stamped, written with the collectives' own writer.
struct WorkerPage {
  pg::Page* page = nullptr;
  explicit WorkerPage(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    void* m = ::mmap(nullptr, pg::kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    REQUIRE(m != MAP_FAILED);
    page = static_cast<pg::Page*>(m);
    page->version.store(pg::kVersion);
    page->magic.store(pg::kMagic);
  }
  ~WorkerPage() { ::munmap(page, pg::kPageBytes); }
};

struct Watched {
  agent_test::TempDir t;
  ProgressBoard board;
  std::vector<std::string> published;
  std::vector<ProgressWatch::Hang> hangs;
  std::optional<WorkerPage> rank0, rank1;
  Watched() {
    board.open(t.path, {0, 1});
    rank0.emplace(board.reset(0));
    rank1.emplace(board.reset(1));
  }
  ProgressWatch watch(std::optional<double> hang_timeout_s, bool publish = true) {
    return ProgressWatch(board, hang_timeout_s,
                         publish ? ProgressWatch::Publish([this](const std::string& s) { published.push_back(s); })
                                 : ProgressWatch::Publish(),
                         [this](const ProgressWatch::Hang& h) { hangs.push_back(h); });
  }
};

}  // namespace

TEST_SUITE("agent::progress_watch") {
  TEST_CASE("each check publishes where the ranks are; a wait past hang_timeout_s is a hang") {
    Watched w;
    ProgressWatch watch = w.watch(30);
    pg::begin_call(*w.rank0->page, pg::Op::allreduce, 7, 4096, 100 * kS);
    watch.check(110 * kS);  // rank 0 in its call for 10 s, rank 1 never called
    REQUIRE(w.published.size() == 1);
    CHECK(w.published[0].find("rank 0: in allreduce #7 (4.0 KiB) for 10.0 s") != std::string::npos);
    CHECK(w.published[0].find("rank 1: unseen") != std::string::npos);
    CHECK(w.hangs.empty());
    watch.check(131 * kS);
    REQUIRE(w.hangs.size() == 1);
    CHECK(w.hangs[0].reason.rfind("hang: no progress for 31 s: rank 0 waits in allreduce #7", 0) == 0);
    CHECK(w.hangs[0].reason.find("(output.hang_timeout_s 30)") != std::string::npos);
    CHECK(w.hangs[0].lines.size() == 2);
  }

  TEST_CASE("without hang_timeout_s nothing is a hang, but a long wait is published as stuck") {
    Watched w;
    ProgressWatch watch = w.watch(std::nullopt);
    pg::begin_call(*w.rank1->page, pg::Op::barrier, 2, 0, 100 * kS);
    watch.check(200 * kS);
    CHECK(w.hangs.empty());
    REQUIRE(w.published.size() == 1);
    CHECK(w.published[0].find("\nstuck: no progress for 100 s") != std::string::npos);
  }

  TEST_CASE("a rank stopped by a signal is a hang without hang_timeout_s, once seen stopped kStoppedAfterS") {
    Watched w;
    pid_t child = ::fork();
    if (child == 0) {
      ::pause();
      _exit(0);
    }
    REQUIRE(::kill(child, SIGSTOP) == 0);
    REQUIRE(agent_test::wait_until([&] { return dtrain::agent::process_state(child) == 'T'; }, 10));
    ProgressWatch watch(w.board, std::nullopt, {}, [&](const ProgressWatch::Hang& h) { w.hangs.push_back(h); },
                        [&](int rank) { return rank == 1 ? long(child) : 0L; });
    pg::begin_call(*w.rank0->page, pg::Op::allreduce, 7, 4096, 100 * kS);
    watch.check(101 * kS);  // first seen stopped
    CHECK(w.hangs.empty());
    watch.check(103 * kS);
    REQUIRE(w.hangs.size() == 1);
    CHECK(w.hangs[0].culprit == 1);
    CHECK(w.hangs[0].state == "T stopped");
    CHECK(w.hangs[0].blame == "never reached allreduce #7 (it made no dtrain collective call); rank 0 waits in it");
    CHECK(w.hangs[0].reason.rfind(fmt::format("hang: rank 1 (pid {}, state T stopped) never reached", child), 0) == 0);
    ::kill(child, SIGKILL);
    CHECK(agent_test::wait_child(child, 10) == 137);
  }

  TEST_CASE("a wait past hang_timeout_s with no rank of this node behind waits kBlameWaitS for the node that has it") {
    Watched w;
    ProgressWatch watch = w.watch(30);
    pg::begin_call(*w.rank0->page, pg::Op::allreduce, 7, 4096, 100 * kS);
    pg::begin_call(*w.rank1->page, pg::Op::allreduce, 7, 4096, 100 * kS);
    watch.check(131 * kS);
    CHECK(w.hangs.empty());
    watch.check(134 * kS);
    REQUIRE(w.hangs.size() == 1);
    CHECK(w.hangs[0].culprit == -1);
  }

  TEST_CASE("the timer checks (once a second) while the workers run") {
    Watched w;
    dtrain::agent::EventLoop loop;
    loop.open({});
    ProgressWatch watch = w.watch(std::nullopt);
    watch.open(loop);
    dtrain::agent::Timer stop;
    stop.open(loop, [&] {
      if (!w.published.empty()) watch.running(false);
      else stop.start(0.05);
    });
    watch.running(true);
    stop.start(0.05);
    loop.run();  // ends once the watch stopped
    CHECK(w.published.size() == 1);
    watch.close();
    stop.close();
    CHECK(loop.close());
  }
}
