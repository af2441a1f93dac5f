// The shared-memory segment (engine/shm/segment.cpp), local ranks as threads over an in-memory
// store: every rank maps the same layout, the name leaves /dev/shm once all mapped it, a rank with
// another view is refused, no room in /dev/shm is a clear error before anything is created, and a
// rank that never attaches is named when the setup times out.
#include <doctest/doctest.h>

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "shm_ranks.hpp"

using namespace dtrain::coll;
using namespace dtrain::coll::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> shm_entries(const std::string& stem) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d))
      if (std::strstr(e->d_name, stem.c_str()) != nullptr) out.push_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

std::string unique_stem(const char* what) { return "dtrain-" + std::string(what) + "-" + std::to_string(::getpid()); }

}  // namespace

TEST_SUITE("collectives::shm::segment") {
  TEST_CASE("the layout: every region after the one before, page-aligned, rings within their bounds") {
    for (int n : {1, 2, 3, 8, 64})
      for (std::size_t p2p : {std::size_t{0}, std::size_t{16} << 10, std::size_t{2} << 20, std::size_t{1} << 30}) {
        CAPTURE(n);
        CAPTURE(p2p);
        const shm::Layout l(n, 5000, p2p);
        CHECK(l.slot_bytes == 8192);  // rounded up to pages
        CHECK(l.buf_bytes % 64 == 0);
        CHECK(3 * l.buf_bytes <= 2 * l.slot_bytes);
        CHECK(l.ctl_offset >= sizeof(shm::Header));
        CHECK(l.boxes_offset >= l.ctl_offset + static_cast<std::size_t>(n) * sizeof(shm::RankCtl));
        CHECK(l.data_offset >= l.boxes_offset + 2 * static_cast<std::size_t>(n) * shm::kBoxStride);
        CHECK(l.rings_offset == l.data_offset + 2 * static_cast<std::size_t>(n) * l.slot_bytes);
        CHECK(l.boxes_offset % 4096 == 0);
        CHECK(l.data_offset % 4096 == 0);
        if (n > 1) {
          CHECK(l.ring_bytes >= (16u << 10) + 4096);
          CHECK(l.ring_bytes <= (1u << 20) + 4096);
          CHECK(l.ring_bytes % 4096 == 0);
        }
        const auto rings = static_cast<std::size_t>(n) * static_cast<std::size_t>(n - 1);
        CHECK(l.bytes == l.rings_offset + rings * (sizeof(shm::Ring) + l.ring_bytes));
      }
  }

  TEST_CASE("every rank maps one segment and sees the same layout; its name leaves /dev/shm once all did") {
    LocalGroup g;
    g.size = 4;
    g.name_prefix = unique_stem("seg");
    std::atomic<int> mapped{0};
    std::vector<std::size_t> left(4, 99);
    std::vector<std::string> names(4);
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      const shm::Segment& s = rank->segment;
      CHECK(s.local_rank() == r);
      CHECK(s.local_size() == 4);
      CHECK(s.header().local_size == 4);
      CHECK(s.header().total_bytes == s.layout().bytes);
      CHECK(s.ctl(r).pid.load() == ::getpid());
      names[static_cast<std::size_t>(r)] = s.name();
      // Every rank writes its byte of rank 0's slot; after all did, every rank reads all of them.
      s.slot(0, 0)[r] = static_cast<std::uint8_t>(10 + r);
      ++mapped;
      mapped.notify_all();
      for (int v = mapped.load(); v < 4; v = mapped.load()) mapped.wait(v);
      for (int j = 0; j < 4; ++j) CHECK(s.slot(0, 0)[j] == 10 + j);
      left[static_cast<std::size_t>(r)] = shm_entries(g.name_prefix).size();
    }));
    for (int r = 0; r < 4; ++r) {
      CHECK(left[static_cast<std::size_t>(r)] == 0);
      CHECK(names[static_cast<std::size_t>(r)] == names[0]);
    }
    CHECK(names[0].find(g.name_prefix) != std::string::npos);
  }

  TEST_CASE("a rank with another view of the layout is refused, naming the settings that must agree") {
    LocalGroup g;
    g.size = 2;
    g.timeout = 1s;  // rank 0 learns only from its deadline that rank 1 never attached
    auto store = dtrain::rdzv::make_memory_store();
    auto errors = on_threads(2, [&](int r) {
      LocalGroup mine = g;
      if (r == 1) mine.slot_bytes = 2 * g.slot_bytes;
      shm::Segment s(segment_options(mine, r, store.get()));
    });
    CHECK_MESSAGE(errors[1].find("does not match this rank's view") != std::string::npos, errors[1]);
    CHECK(errors[1].find("DTRAIN_SHM_SLOT_BYTES") != std::string::npos);
    CHECK_MESSAGE(errors[0].find("ranks [1] did not attach") != std::string::npos, errors[0]);
  }

  TEST_CASE("not enough room in /dev/shm: a clear error up front, nothing created, the others told at once") {
    LocalGroup g;
    g.size = 2;
    g.name_prefix = unique_stem("space");
    g.slot_bytes = std::size_t{1} << 42;  // 4 TiB per slot: more than any /dev/shm holds
    g.timeout = 20s;
    const auto t0 = std::chrono::steady_clock::now();
    auto errors = on_local_ranks(g, [](std::unique_ptr<LocalRank>&, int) {});
    CHECK_MESSAGE(errors[0].find("not enough space in /dev/shm") != std::string::npos, errors[0]);
    CHECK(errors[0].find("DTRAIN_TRANSPORT=tcp") != std::string::npos);
    CHECK_MESSAGE(errors[1].find("shared-memory setup failed on local rank 0") != std::string::npos, errors[1]);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);  // told, not timed out
    CHECK(shm_entries(g.name_prefix).empty());
  }

  TEST_CASE("a rank that never attaches is named when the setup times out, and nothing is left behind") {
    LocalGroup g;
    g.size = 3;
    g.name_prefix = unique_stem("absent");
    g.timeout = 300ms;  // time itself is under test: the setup's deadline
    auto store = dtrain::rdzv::make_memory_store();
    auto errors = on_threads(2, [&](int r) { shm::Segment s(segment_options(g, r, store.get())); });
    for (const auto& e : errors) CHECK_MESSAGE(e.find("ranks [2] did not attach within 0.3 s") != std::string::npos, e);
    CHECK(shm_entries(g.name_prefix).empty());
  }
}
