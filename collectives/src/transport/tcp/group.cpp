#include "group.hpp"

#include <algorithm>
#include <cstring>

#include "../../reduce.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::coll::tcp {
namespace {
constexpr std::size_t kSmallBytes = 64 * 1024;
}  // namespace

Group::Group(Mesh& mesh, std::vector<int> ranks) : mesh_(mesh), ranks_(std::move(ranks)) {
  auto it = std::find(ranks_.begin(), ranks_.end(), mesh_.rank());
  DTRAIN_CHECK(it != ranks_.end(), "rank {} not in its group", mesh_.rank());
  idx_ = static_cast<int>(it - ranks_.begin());
}

std::uint8_t* Group::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Group::barrier(const OpDesc& d) { allreduce(d, nullptr, 0, DTRAIN_UINT8, DTRAIN_MAX, 1); }

void Group::allreduce(const OpDesc& d, void* buf_v, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                      int div) {
  const int n = size();
  const std::size_t esz = dtype_size(dtype);
  auto* buf = static_cast<std::uint8_t*>(buf_v);
  if (n == 1) {
    divide_in_place(buf, count, dtype, div);
    return;
  }
  if (count * esz > kSmallBytes && count >= static_cast<std::size_t>(n)) {
    std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
    for (int b = 0; b <= n; ++b)
      starts[static_cast<std::size_t>(b)] = count * static_cast<std::size_t>(b) / static_cast<std::size_t>(n);
    ring_reduce_scatter(d, buf, starts, esz, dtype, op, div);
    ring_allgather(d, buf, starts, esz);
    return;
  }
  recursive_doubling(d, buf, count, dtype, op, div);
}

// Ranks beyond the largest power of two fold into a partner first and get the result back last.
void Group::recursive_doubling(const OpDesc& d, std::uint8_t* buf, std::size_t count, dtrain_dtype_t dtype,
                               dtrain_op_t op, int div) {
  const int n = size();
  const std::size_t bytes = count * dtype_size(dtype);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  std::uint8_t* tmp = scratch(bytes);
  auto combine = [&](bool partner_lower) {
    const void* srcs[2] = {partner_lower ? static_cast<const void*>(tmp) : buf,
                           partner_lower ? static_cast<const void*>(buf) : tmp};
    reduce_n(srcs, 2, buf, nullptr, count, dtype, op, 1);
  };
  if (idx_ >= p) {
    mesh_.exchange(d, at(idx_ - p), buf, bytes, -1, nullptr, 0);
    mesh_.exchange(d, -1, nullptr, 0, at(idx_ - p), buf, bytes);
    return;
  }
  if (idx_ + p < n) {
    mesh_.exchange(d, -1, nullptr, 0, at(idx_ + p), tmp, bytes);
    combine(false);
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int partner = idx_ ^ mask;
    mesh_.exchange(d, at(partner), buf, bytes, at(partner), tmp, bytes);
    combine(partner < idx_);
  }
  divide_in_place(buf, count, dtype, div);
  if (idx_ + p < n) mesh_.exchange(d, at(idx_ + p), buf, bytes, -1, nullptr, 0);
}

void Group::ring_reduce_scatter(const OpDesc& d, std::uint8_t* buf, const std::vector<std::size_t>& starts,
                                std::size_t esz, dtrain_dtype_t dtype, dtrain_op_t op, int div) {
  const int n = size();
  const int next = at((idx_ + 1) % n);
  const int prev = at((idx_ + n - 1) % n);
  const std::size_t chunk = std::max<std::size_t>(1, mesh_.chunk_bytes() / esz);
  std::uint8_t* tmp = scratch(chunk * esz);
  auto blen = [&](int b) { return starts[static_cast<std::size_t>(b) + 1] - starts[static_cast<std::size_t>(b)]; };
  // Every rank walks the same number of pieces per step (sized by the largest block), so sender and
  // receiver agree on each message even when block lengths differ by one element.
  std::size_t maxb = 0;
  for (int b = 0; b < n; ++b) maxb = std::max(maxb, blen(b));
  // Step s: send block (idx-s-1), receive block (idx-s-2) and fold it: after n-1 steps this rank
  // holds block idx reduced over every rank, in ring order starting at rank idx+1.
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((idx_ - s - 1) % n + n) % n;
    const int rb = ((idx_ - s - 2) % n + n) % n;
    const std::size_t slen = blen(sb), rlen = blen(rb);
    for (std::size_t off = 0; off < maxb; off += chunk) {
      const std::size_t sl = off < slen ? std::min(chunk, slen - off) : 0;
      const std::size_t rl = off < rlen ? std::min(chunk, rlen - off) : 0;
      mesh_.exchange(d, next, buf + (starts[static_cast<std::size_t>(sb)] + off) * esz, sl * esz, prev, tmp,
                     rl * esz);
      if (rl) {
        std::uint8_t* own = buf + (starts[static_cast<std::size_t>(rb)] + off) * esz;
        const void* srcs[2] = {tmp, own};
        reduce_n(srcs, 2, own, nullptr, rl, dtype, op, s == n - 2 ? div : 1);
      }
    }
  }
}

void Group::ring_allgather(const OpDesc& d, std::uint8_t* buf, const std::vector<std::size_t>& starts,
                           std::size_t esz) {
  const int n = size();
  const int next = at((idx_ + 1) % n);
  const int prev = at((idx_ + n - 1) % n);
  const std::size_t chunk = std::max<std::size_t>(1, mesh_.chunk_bytes() / esz);
  auto blen = [&](int b) { return starts[static_cast<std::size_t>(b) + 1] - starts[static_cast<std::size_t>(b)]; };
  // As in ring_reduce_scatter: the same number of pieces per step on every rank.
  std::size_t maxb = 0;
  for (int b = 0; b < n; ++b) maxb = std::max(maxb, blen(b));
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((idx_ - s) % n + n) % n;
    const int rb = ((idx_ - s - 1) % n + n) % n;
    const std::size_t slen = blen(sb), rlen = blen(rb);
    for (std::size_t off = 0; off < maxb; off += chunk) {
      const std::size_t sl = off < slen ? std::min(chunk, slen - off) : 0;
      const std::size_t rl = off < rlen ? std::min(chunk, rlen - off) : 0;
      mesh_.exchange(d, next, buf + (starts[static_cast<std::size_t>(sb)] + off) * esz, sl * esz, prev,
                     buf + (starts[static_cast<std::size_t>(rb)] + off) * esz, rl * esz);
    }
  }
}

void Group::broadcast(const OpDesc& d, void* buf_v, std::size_t bytes, int root) {
  const int n = size();
  if (n == 1) return;
  // Data flows only out of the root, so a rank with a different root or count might never hear of
  // the difference: agree on the fingerprint first (recursive doubling of empty messages).
  allreduce(d, nullptr, 0, DTRAIN_UINT8, DTRAIN_MAX, 1);
  auto* buf = static_cast<std::uint8_t*>(buf_v);
  const int v = (idx_ - root + n) % n;
  auto rank_of = [&](int vv) { return at((vv + root) % n); };
  if (bytes <= kSmallBytes) {
    int mask = 1;
    while (mask < n) {
      if (v & mask) {
        mesh_.exchange(d, -1, nullptr, 0, rank_of(v - mask), buf, bytes);
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (v + mask < n) mesh_.exchange(d, rank_of(v + mask), buf, bytes, -1, nullptr, 0);
    return;
  }
  // Pipelined chain root -> root+1 -> ...: forward each chunk as soon as it arrives.
  const std::size_t chunk = mesh_.chunk_bytes();
  for (std::size_t off = 0; off < bytes; off += chunk) {
    const std::size_t len = std::min(chunk, bytes - off);
    if (v > 0) mesh_.exchange(d, -1, nullptr, 0, rank_of(v - 1), buf + off, len);
    if (v < n - 1) mesh_.exchange(d, rank_of(v + 1), buf + off, len, -1, nullptr, 0);
  }
}

void Group::allgather(const OpDesc& d, void* buf, std::size_t block_bytes) {
  const int n = size();
  if (n == 1) return;
  std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
  for (int b = 0; b <= n; ++b) starts[static_cast<std::size_t>(b)] = static_cast<std::size_t>(b) * block_bytes;
  ring_allgather(d, static_cast<std::uint8_t*>(buf), starts, 1);
}

void Group::reduce_scatter(const OpDesc& d, void* buf, void* out, std::size_t block_count, dtrain_dtype_t dtype,
                           dtrain_op_t op, int div) {
  const int n = size();
  const std::size_t esz = dtype_size(dtype);
  std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
  for (int b = 0; b <= n; ++b) starts[static_cast<std::size_t>(b)] = static_cast<std::size_t>(b) * block_count;
  if (n > 1) {
    ring_reduce_scatter(d, static_cast<std::uint8_t*>(buf), starts, esz, dtype, op, div);
  } else {
    divide_in_place(buf, block_count, dtype, div);
  }
  if (block_count != 0)
    std::memmove(out, static_cast<std::uint8_t*>(buf) + starts[static_cast<std::size_t>(idx_)] * esz,
                 block_count * esz);
}

}  // namespace dtrain::coll::tcp
