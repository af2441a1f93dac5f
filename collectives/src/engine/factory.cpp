// make_engine(): the engine from where the group's ranks are, and its options from the group's. With
// host_of known (a split) every rank decides from the whole group, so all pick the same engine even
// when hosts hold different numbers of its ranks. Store keys: <key_prefix>node<w>/ for a host's shm
// engine (w: the world rank of the host's first rank in the group), <key_prefix>tcp/ for the sockets,
// <key_prefix>lr/ for the hierarchical engine.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/system.hpp"
#include "engine.hpp"
#include "hier/hier_engine.hpp"
#include "self/self_engine.hpp"
#include "shm/shm_engine.hpp"
#include "tcp/tcp_engine.hpp"

namespace dtrain::coll {
namespace {

shm::Options shm_options(const EngineOptions& o) {
  shm::Options s;
  auto& seg = s.segment;
  seg.local_rank = static_cast<int>(std::find(o.node.begin(), o.node.end(), o.rank) - o.node.begin());
  for (int r : o.node) seg.global_ranks.push_back(o.members[static_cast<std::size_t>(r)]);
  seg.store = o.store;
  seg.key_prefix = fmt::format("{}node{}/", o.key_prefix, seg.global_ranks.front());
  seg.name_prefix = o.shm_name_prefix;
  seg.timeout = o.timeout;
  seg.slot_bytes = o.shm_slot_bytes;
  seg.p2p_bytes = o.shm_p2p_bytes;
  s.spin_us = o.spin_us;
  return s;
}

tcp::Options tcp_options(const EngineOptions& o) {
  tcp::Options t;
  t.members = o.members;
  t.rank = o.rank;
  t.store = o.store;
  t.key_prefix = o.key_prefix;
  t.timeout = o.timeout;
  t.chunk_bytes = o.tcp_chunk_bytes;
  t.advertise_host = tcp::resolve_advertise_host(o.advertise, o.store);
  // Spinning pays while this host's ranks have a CPU each (as the shm engine's waits).
  t.spin_us = static_cast<int>(o.node.size()) > sys::usable_cpus() ? 0 : o.spin_us;
  return t;
}

}  // namespace

std::unique_ptr<Engine> make_engine(const EngineOptions& o) {
  const int n = static_cast<int>(o.members.size());
  const int local = static_cast<int>(o.node.size());
  DTRAIN_CHECK(o.store != nullptr, "no store");
  DTRAIN_CHECK(o.rank >= 0 && o.rank < n, "rank {} of {}", o.rank, n);
  DTRAIN_CHECK(local >= 1 && local <= n && std::find(o.node.begin(), o.node.end(), o.rank) != o.node.end(),
               "rank {} is not among its host's {} ranks", o.rank, local);
  if (n == 1) return std::make_unique<self::Engine>();
  // The most ranks any host holds, and whether one host holds them all.
  int most = local;
  bool one_host = local == n;
  if (!o.host_of.empty()) {
    DTRAIN_CHECK(o.host_of.size() == o.members.size(), "host_of of {} ranks for {}", o.host_of.size(), n);
    std::map<std::int64_t, int> per_host;
    for (std::int64_t h : o.host_of) most = std::max(most, ++per_host[h]);
    one_host = per_host.size() == 1;
  }
  if (o.kind == "tcp" || most == 1) return std::make_unique<tcp::Engine>(tcp_options(o));
  if (one_host) return std::make_unique<shm::Engine>(shm_options(o));
  return std::make_unique<hier::Engine>(hier::Options{shm_options(o), o.node, tcp_options(o)});
}

}  // namespace dtrain::coll
