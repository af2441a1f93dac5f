#pragma once
// The progress pages of this node's workers (dtrain/common/progress_page.hpp): one zeroed file
// per local rank, <run folder>/progress-R, handed to the worker as DTRAIN_PROGRESS_FILE and mapped
// here for reading.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dtrain/agent/hang.hpp"

namespace dtrain::agent {

class ProgressBoard {
 public:
  ProgressBoard() = default;
  ~ProgressBoard();
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  // Creates a page for each rank in <dir> (which it creates if needed) (the pages of an earlier open() are unmapped). Throws IoError.
  void open(const std::filesystem::path& dir, const std::vector<int>& ranks);
  // Zeroes a rank's page before its worker starts (a new generation). "" when the board is closed.
  std::string reset(int rank);
  std::vector<RankProgress> snapshot() const;
  bool empty() const { return pages_.empty(); }
  const std::filesystem::path& dir() const { return dir_; }  // the run folder: the pages, the stacks files

 private:
  std::filesystem::path dir_;
  std::map<int, progress::Page*> pages_;
  std::set<int> fresh_;  // created zeroed and not handed out yet: nothing to clear
};

}  // namespace dtrain::agent
