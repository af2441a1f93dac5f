// The shared-memory engine's slot collectives (engine/shm/slots.cpp), local ranks as threads over one
// segment with small slots, so that a message takes many rounds: allreduce on its one-sync path and
// its pipelined path (non-multiples of the pieces, the three rotating slot sets), broadcast from
// every root, allgather and reduce_scatter, against the results computed here.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shm_ranks.hpp"

using namespace dtrain::coll;
using namespace dtrain::coll::test;

namespace {

std::int64_t value(int rank, std::size_t i) { return static_cast<std::int64_t>(i) * 7 + rank * 1000003; }

// Runs call d on a rank through `body` between Peers::begin and end.
template <class F>
void call(LocalRank& rank, const OpDesc& d, F&& body) {
  rank.peers.begin(d);
  body();
  rank.peers.end();
}

const std::uint8_t* in(const std::vector<std::int64_t>& v) { return reinterpret_cast<const std::uint8_t*>(v.data()); }
std::uint8_t* out(std::vector<std::int64_t>& v) { return reinterpret_cast<std::uint8_t*>(v.data()); }

}  // namespace

TEST_SUITE("collectives::shm::slots") {
  TEST_CASE("allreduce, broadcast, allgather and reduce_scatter over many rounds of small slots") {
    for (int n : {2, 3, 4}) {
      CAPTURE(n);
      LocalGroup g;
      g.size = n;
      g.slot_bytes = 4096;  // buffers of 2720 bytes: 340 int64 per round and set
      no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
        std::uint64_t seq = 0;
        for (std::size_t count : {std::size_t{1}, std::size_t{339}, std::size_t{341}, std::size_t{4000}, std::size_t{100003}}) {
          std::vector<std::int64_t> send(count), recv(count, -1);
          for (std::size_t i = 0; i < count; ++i) send[i] = value(r, i);
          const OpDesc d = op_desc(++seq, OpKind::allreduce, count, DTRAIN_INT64);
          call(*rank, d, [&] { rank->slots.allreduce(d, in(send), out(recv)); });
          for (std::size_t i = 0; i < count; ++i) {
            std::int64_t want = 0;
            for (int j = 0; j < n; ++j) want += value(j, i);
            if (recv[i] != want) throw std::runtime_error("allreduce of " + std::to_string(count) + ": element " + std::to_string(i));
          }
          for (int root = 0; root < n; ++root) {
            std::vector<std::int64_t> b(count, -1);
            if (r == root) b = send;
            const OpDesc bd = op_desc(++seq, OpKind::broadcast, count, DTRAIN_INT64, std::chrono::seconds(30), DTRAIN_SUM, root);
            call(*rank, bd, [&] { rank->slots.broadcast(bd, in(b), out(b)); });
            for (std::size_t i = 0; i < count; ++i)
              if (b[i] != value(root, i)) throw std::runtime_error("broadcast from " + std::to_string(root));
          }
          std::vector<std::int64_t> all(count * static_cast<std::size_t>(n), -1);
          const OpDesc ad = op_desc(++seq, OpKind::allgather, count, DTRAIN_INT64);
          call(*rank, ad, [&] { rank->slots.allgather(ad, in(send), out(all)); });
          for (int j = 0; j < n; ++j)
            for (std::size_t i = 0; i < count; ++i)
              if (all[static_cast<std::size_t>(j) * count + i] != value(j, i)) throw std::runtime_error("allgather block " + std::to_string(j));
          std::vector<std::int64_t> blocks(count * static_cast<std::size_t>(n)), mine(count, -1);
          for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = value(r, i);
          const OpDesc rd = op_desc(++seq, OpKind::reduce_scatter, count, DTRAIN_INT64);
          call(*rank, rd, [&] { rank->slots.reduce_scatter(rd, in(blocks), out(mine)); });
          for (std::size_t i = 0; i < count; ++i) {
            std::int64_t want = 0;
            for (int j = 0; j < n; ++j) want += value(j, static_cast<std::size_t>(r) * count + i);
            if (mine[i] != want) throw std::runtime_error("reduce_scatter element " + std::to_string(i));
          }
        }
      }));
    }
  }
}
