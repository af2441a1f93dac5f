// Progress pages (progress_board.hpp), and read_progress() of hang.hpp.
#include "progress_board.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {
namespace {

namespace fs = std::filesystem;
namespace pg = dtrain::progress;

// A page is a file of the run folder itself (a folder of their own cost a directory created and
// removed per launch, slow on file systems that discard freed blocks at once).
constexpr char kPagePrefix[] = "progress-";
std::string page_name(int rank) { return fmt::format("{}{}", kPagePrefix, rank); }

// Maps a page file (created with `create`); null when it cannot. A page is made whole under a
// temporary name and renamed into place, so that a reader (dtrain status, a test) never maps a file
// shorter than a page, as it could between an O_TRUNC and the ftruncate (its reads would fault).
pg::Page* map_page(const fs::path& p, bool create) {
  const std::string made = create ? p.string() + ".new" : p.string();
  int fd = ::open(made.c_str(), create ? (O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC), 0600);
  if (fd < 0) return nullptr;
  bool whole = create ? ::ftruncate(fd, static_cast<off_t>(pg::kPageBytes)) == 0
                      : ::lseek(fd, 0, SEEK_END) >= static_cast<off_t>(pg::kPageBytes);
  void* m = whole ? ::mmap(nullptr, pg::kPageBytes, create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
  ::close(fd);
  if (create && (m == MAP_FAILED || ::rename(made.c_str(), p.c_str()) != 0)) {
    int e = errno;
    if (m != MAP_FAILED) ::munmap(m, pg::kPageBytes);
    ::unlink(made.c_str());
    errno = e;
    return nullptr;
  }
  return m == MAP_FAILED ? nullptr : static_cast<pg::Page*>(m);
}

}  // namespace

ProgressBoard::~ProgressBoard() {
  for (auto& [rank, p] : pages_) ::munmap(p, pg::kPageBytes);
}

void ProgressBoard::open(const fs::path& dir, const std::vector<int>& ranks) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  for (auto& [rank, page] : pages_) ::munmap(page, pg::kPageBytes);  // the ranks of an earlier generation
  pages_.clear();
  fresh_.clear();
  dir_ = dir;
  for (int r : ranks) {
    fs::path p = dir / page_name(r);
    pg::Page* page = map_page(p, true);
    if (page == nullptr) throw IoError(fmt::format("cannot make the progress page {}: {}", p.string(), errno_text(errno)));
    pages_[r] = page;
    fresh_.insert(r);
  }
}

std::string ProgressBoard::reset(int rank) {
  auto it = pages_.find(rank);
  if (it == pages_.end()) return "";
  // a new file reads as zeros: writing them would only dirty its page (and, on disk, make work)
  if (fresh_.erase(rank) == 0) std::memset(static_cast<void*>(it->second), 0, pg::kPageBytes);
  return (dir_ / page_name(rank)).string();
}

std::vector<RankProgress> ProgressBoard::snapshot() const {
  std::vector<RankProgress> out;
  for (const auto& [rank, p] : pages_) out.push_back({rank, pg::read(*p)});
  return out;
}

std::vector<RankProgress> read_progress(const fs::path& dir) {
  std::vector<RankProgress> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    constexpr std::size_t kStem = sizeof kPagePrefix - 1;
    if (name.rfind(kPagePrefix, 0) != 0) continue;
    char* endp = nullptr;
    long rank = std::strtol(name.c_str() + kStem, &endp, 10);
    if (endp == name.c_str() + kStem || *endp != '\0') continue;
    pg::Page* p = map_page(it->path(), false);
    if (p == nullptr) continue;
    out.push_back({static_cast<int>(rank), pg::read(*p)});
    ::munmap(p, pg::kPageBytes);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace dtrain::agent
