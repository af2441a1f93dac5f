#pragma once
// Which of a worker's streams a choice covers (torchrun's --redirects and --tee): bit 1 stdout,
// bit 2 stderr, for every local rank ("3") or per local rank ("0:3,1:2").
#include <map>
#include <string>

namespace dtrain::config {

struct StreamChoice {
  int all = 0;
  std::map<int, int> by_local_rank;
  int of(int local_rank) const {
    auto it = by_local_rank.find(local_rank);
    return it == by_local_rank.end() ? all : it->second;
  }
  bool none() const;  // no stream of any local rank
};

// "0".."3", or LOCAL_RANK:N pairs; ConfigError naming `flag` when the text is neither.
StreamChoice parse_streams(const std::string& text, const char* flag);

}  // namespace dtrain::config
