#pragma once
// Who a communicator's ranks are: their world ranks, which one this process is, the host of each
// (known for a split and for a communicator made through a caller's store; empty for the world,
// whose hosts hold contiguous ranks), and where the communicator's store keys live.
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::coll {

struct Members {
  std::vector<int> world;              // world rank of each rank of the communicator
  int rank = 0;                        // this process's rank in it
  std::vector<std::int64_t> host_of;   // host of each rank (equal values: one host); empty for the world
  std::int64_t host = 0;               // this process's host (the world rank of its host's first rank)
  std::string key_prefix;              // e.g. "coll/1/" or "coll/1/split/2/0/"

  int size() const { return static_cast<int>(world.size()); }
};

}  // namespace dtrain::coll
