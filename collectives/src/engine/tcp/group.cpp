#include "group.hpp"

#include <algorithm>
#include <cstring>

#include "../../reduce.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::coll::tcp {
namespace {
constexpr std::size_t kSmallBytes = 64 * 1024;
}  // namespace

Group::Group(Channel& channel, std::vector<int> ranks) : channel_(channel), ranks_(std::move(ranks)) {
  auto it = std::find(ranks_.begin(), ranks_.end(), channel_.rank());
  DTRAIN_CHECK(it != ranks_.end(), "rank {} not in its group", channel_.rank());
  idx_ = static_cast<int>(it - ranks_.begin());
}

Group::Fold Group::folder(dtrain_dtype_t dtype, dtrain_op_t op, int div) {
  return [dtype, op, div](const void* in, const void* own, void* out, std::size_t count, bool last) {
    const void* srcs[2] = {in, own};
    reduce_n(srcs, 2, out, nullptr, count, dtype, op, last ? div : 1);
  };
}

std::uint8_t* Group::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Group::barrier(const OpDesc& d) { allreduce(d, nullptr, nullptr, 0, DTRAIN_UINT8, DTRAIN_MAX, 1); }

void Group::allreduce(const OpDesc& d, const void* send_v, void* recv_v, std::size_t count, dtrain_dtype_t dtype,
                      dtrain_op_t op, int div) {
  const int n = size();
  const std::size_t esz = dtype_size(dtype);
  const auto* send = static_cast<const std::uint8_t*>(send_v);
  auto* buf = static_cast<std::uint8_t*>(recv_v);
  if (count * esz > kSmallBytes && count >= static_cast<std::size_t>(n) && n > 1) {
    std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
    for (int b = 0; b <= n; ++b)
      starts[static_cast<std::size_t>(b)] = count * static_cast<std::size_t>(b) / static_cast<std::size_t>(n);
    ring(d, send, buf, starts, esz, folder(dtype, op, div), n - 1, n - 1);
    return;
  }
  if (count != 0 && send != buf) std::memmove(buf, send, count * esz);
  if (n == 1) {
    divide_in_place(buf, count, dtype, div);
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
    channel_.exchange(d, at(idx_ - p), buf, bytes, -1, nullptr, 0);
    channel_.exchange(d, -1, nullptr, 0, at(idx_ - p), buf, bytes);
    return;
  }
  if (idx_ + p < n) {
    channel_.exchange(d, -1, nullptr, 0, at(idx_ + p), tmp, bytes);
    combine(false);
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int partner = idx_ ^ mask;
    channel_.exchange(d, at(partner), buf, bytes, at(partner), tmp, bytes);
    combine(partner < idx_);
  }
  divide_in_place(buf, count, dtype, div);
  if (idx_ + p < n) channel_.exchange(d, at(idx_ + p), buf, bytes, -1, nullptr, 0);
}

// The ring's steps as one pipelined stream (Channel::stream): `rs` reduce-scatter steps, then `ag`
// allgather steps, each step's blocks cut into the same number of chunks on every rank (sized by the
// largest block, so sender and receiver agree on every message even when block lengths differ by
// one element). Reduce-scatter step s sends block idx-s-1 (this rank's own contribution at step 0,
// from send; the block it folded at step s-1 after that, from buf) and receives block idx-s-2 into
// tmp, folded with this rank's contribution into buf; after n-1 steps buf holds block idx reduced
// over every rank, in ring order starting at rank idx+1. Allgather step t sends block idx-t and
// receives block idx-t-1 into buf. A chunk of one step is sent as soon as the same chunk of the step
// before has arrived (and been folded), so the steps overlap and both directions stay busy.
void Group::ring(const OpDesc& d, const std::uint8_t* send, std::uint8_t* buf, const std::vector<std::size_t>& starts,
                 std::size_t esz, const Fold& fold, int rs, int ag) {
  const int n = size();
  const int next = at((idx_ + 1) % n);
  const int prev = at((idx_ + n - 1) % n);
  const std::size_t chunk = std::max<std::size_t>(1, channel_.chunk_bytes() / esz);
  auto blen = [&](int b) { return starts[static_cast<std::size_t>(b) + 1] - starts[static_cast<std::size_t>(b)]; };
  auto block = [&](int b) { return ((b % n) + n) % n; };
  std::size_t maxb = 0;
  for (int b = 0; b < n; ++b) maxb = std::max(maxb, blen(b));
  const std::size_t chunks = std::max<std::size_t>(1, (maxb + chunk - 1) / chunk);
  std::uint8_t* tmp = rs > 0 ? scratch(chunk * esz) : nullptr;
  std::vector<Channel::Segment> segs;
  segs.reserve(static_cast<std::size_t>(rs + ag) * chunks);
  for (int step = 0; step < rs + ag; ++step) {
    const bool reducing = step < rs;
    const int sb = block(reducing ? idx_ - step - 1 : idx_ - (step - rs));
    const int rb = block(sb - 1);
    const std::uint8_t* from = reducing && step == 0 ? send : buf;
    for (std::size_t off = 0; off < chunks * chunk; off += chunk) {
      const std::size_t sl = off < blen(sb) ? std::min(chunk, blen(sb) - off) : 0;
      const std::size_t rl = off < blen(rb) ? std::min(chunk, blen(rb) - off) : 0;
      std::uint8_t* into = reducing ? tmp : buf + (starts[static_cast<std::size_t>(rb)] + off) * esz;
      segs.push_back({from + (starts[static_cast<std::size_t>(sb)] + off) * esz, sl * esz, into, rl * esz});
    }
  }
  channel_.stream(d, next, prev, segs, chunks, [&](std::size_t i) {
    const auto step = static_cast<int>(i / chunks);
    if (step >= rs || segs[i].rlen == 0) return;
    const int rb = block(idx_ - step - 2);
    const std::size_t at = starts[static_cast<std::size_t>(rb)] * esz + (i % chunks) * chunk * esz;
    fold(tmp, send + at, buf + at, segs[i].rlen / esz, step == rs - 1);
  });
}

void Group::broadcast(const OpDesc& d, void* buf_v, std::size_t bytes, int root) {
  const int n = size();
  if (n == 1) return;
  // Data flows only out of the root, so a rank with a different root or count might never hear of
  // the difference: agree on the fingerprint first (recursive doubling of empty messages).
  allreduce(d, nullptr, nullptr, 0, DTRAIN_UINT8, DTRAIN_MAX, 1);
  auto* buf = static_cast<std::uint8_t*>(buf_v);
  const int v = (idx_ - root + n) % n;
  auto rank_of = [&](int vv) { return at((vv + root) % n); };
  if (bytes <= kSmallBytes) {
    int mask = 1;
    while (mask < n) {
      if (v & mask) {
        channel_.exchange(d, -1, nullptr, 0, rank_of(v - mask), buf, bytes);
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (v + mask < n) channel_.exchange(d, rank_of(v + mask), buf, bytes, -1, nullptr, 0);
    return;
  }
  // Pipelined chain root -> root+1 -> ...: forward each chunk as soon as it arrives.
  const std::size_t chunk = channel_.chunk_bytes();
  for (std::size_t off = 0; off < bytes; off += chunk) {
    const std::size_t len = std::min(chunk, bytes - off);
    if (v > 0) channel_.exchange(d, -1, nullptr, 0, rank_of(v - 1), buf + off, len);
    if (v < n - 1) channel_.exchange(d, rank_of(v + 1), buf + off, len, -1, nullptr, 0);
  }
}

void Group::allgather(const OpDesc& d, void* buf, std::size_t block_bytes) {
  const int n = size();
  if (n == 1) return;
  std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
  for (int b = 0; b <= n; ++b) starts[static_cast<std::size_t>(b)] = static_cast<std::size_t>(b) * block_bytes;
  ring(d, nullptr, static_cast<std::uint8_t*>(buf), starts, 1, {}, 0, n - 1);
}

void Group::reduce_scatter(const OpDesc& d, const void* send, void* work_v, void* out, std::size_t block_count,
                           dtrain_dtype_t dtype, dtrain_op_t op, int div) {
  const int n = size();
  const std::size_t esz = dtype_size(dtype);
  auto* work = static_cast<std::uint8_t*>(work_v);
  std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
  for (int b = 0; b <= n; ++b) starts[static_cast<std::size_t>(b)] = static_cast<std::size_t>(b) * block_count;
  const std::size_t own = starts[static_cast<std::size_t>(idx_)] * esz;
  if (n > 1) {
    ring(d, static_cast<const std::uint8_t*>(send), work, starts, esz, folder(dtype, op, div), n - 1, 0);
  } else {
    if (block_count != 0 && work_v != send) std::memmove(work, send, block_count * esz);
    divide_in_place(work, block_count, dtype, div);
  }
  if (block_count != 0 && out != work + own) std::memmove(out, work + own, block_count * esz);
}

}  // namespace dtrain::coll::tcp
