// The slot collectives (slots.hpp).
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "slots.hpp"

#include <algorithm>
#include <cstring>

#include "../../reduce.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::coll::shm {
namespace {

constexpr std::size_t kSmallBytes = 32 * 1024;  // one-sync path up to this many bytes per rank

// Allreduces of 32 MiB and more write recv with streaming (non-temporal) stores: the result is
// bigger than the caches anyway, and it saves the read-for-ownership of every recv line (measured:
// faster at 64 MiB, not at 16 MiB, hence the threshold).
constexpr std::size_t kStreamBytes = 32u << 20;

void copy_stream(void* dst_v, const void* src_v, std::size_t bytes) {
#if defined(__SSE2__)
  auto* dst = static_cast<std::uint8_t*>(dst_v);
  const auto* src = static_cast<const std::uint8_t*>(src_v);
  const std::size_t head = std::min(bytes, (16 - (reinterpret_cast<std::uintptr_t>(dst) & 15u)) & 15u);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), e);
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst_v, src_v, bytes);
#endif
}

void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace

Slots::Slots(Segment& segment, Barrier& barrier)
    : seg_(segment),
      barrier_(barrier),
      me_(segment.local_rank()),
      n_(segment.local_size()),
      srcs_(static_cast<std::size_t>(segment.local_size())) {}

void Slots::allreduce(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  if (d.count * dtype_size(d.dtype) <= std::min(kSmallBytes, seg_.layout().buf_bytes))
    allreduce_small(d, send, recv);
  else
    allreduce_pipelined(d, send, recv);
}

// Everyone publishes everything, everyone reduces everything in rank order.
void Slots::allreduce_small(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  const int set = next_set();
  std::memcpy(seg_.slot(set, me_), send, d.count * dtype_size(d.dtype));
  barrier_.sync(d);
  for (int j = 0; j < n_; ++j) srcs_[static_cast<std::size_t>(j)] = seg_.slot(set, j);
  reduce_n(srcs_.data(), n_, recv, nullptr, d.count, d.dtype, d.op, d.op == DTRAIN_AVG ? n_ : 1);
}

// The bandwidth path's rounds: round t covers the elements [off, off + m) in slot set
// (first + t) % 3, cut into pieces of p elements (cache-line multiples); local rank j reduces piece j
// of every rank's contribution.
struct Slots::Rounds {
  struct Round {
    std::size_t off = 0, m = 0, p = 0;
    int set = 0;
  };

  Rounds(Slots& slots, const OpDesc& desc, const std::uint8_t* s, std::uint8_t* r)
      : seg(slots.seg_), d(desc), send(s), recv(r), me(slots.me_), n(slots.n_), esz(dtype_size(desc.dtype)),
        align(64 / esz), piece_cap((seg.layout().buf_bytes / static_cast<std::size_t>(n)) / esz / align * align),
        round_cap(piece_cap * static_cast<std::size_t>(n)), first(slots.round_), div(desc.op == DTRAIN_AVG ? n : 1),
        stream(desc.count * esz >= kStreamBytes), srcs(slots.srcs_) {
    DTRAIN_CHECK(piece_cap > 0, "slot too small");
    n_rounds = (d.count + round_cap - 1) / round_cap;
    slots.round_ += n_rounds;
  }

  Round geometry(std::size_t t) const {
    Round r;
    r.off = t * round_cap;
    r.m = std::min(round_cap, d.count - r.off);
    r.p = std::min(piece_cap, round_up((r.m + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n), align));
    r.set = static_cast<int>((first + t) % 3u);
    return r;
  }
  static void piece(const Round& r, int j, std::size_t& start, std::size_t& len) {
    start = std::min(r.m, static_cast<std::size_t>(j) * r.p);
    len = std::min(r.m, start + r.p) - start;
  }
  // This rank's input for the pieces the others reduce, into its slot.
  void copy_in(const Round& r) {
    std::uint8_t* mine = seg.slot(r.set, me);
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      std::size_t s, l;
      piece(r, j, s, l);
      if (l) std::memcpy(mine + s * esz, send + (r.off + s) * esz, l * esz);
    }
  }
  // This rank's piece over every rank's contribution, into recv and its slot.
  void reduce_own(const Round& r) {
    std::size_t s, l;
    piece(r, me, s, l);
    if (!l) return;
    for (int j = 0; j < n; ++j)
      srcs[static_cast<std::size_t>(j)] = j == me ? send + (r.off + s) * esz : seg.slot(r.set, j) + s * esz;
    std::uint8_t* shared = seg.slot(r.set, me) + s * esz;
    if (stream) {
      // Reduce into the (cached) slot, then stream that to recv.
      reduce_n(srcs.data(), n, shared, nullptr, l, d.dtype, d.op, div);
      copy_stream(recv + (r.off + s) * esz, shared, l * esz);
    } else {
      reduce_n(srcs.data(), n, recv + (r.off + s) * esz, shared, l, d.dtype, d.op, div);
    }
  }
  // The pieces the others reduced, from their slots into recv.
  void copy_out(const Round& r) {
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      std::size_t s, l;
      piece(r, j, s, l);
      if (!l) continue;
      if (stream)
        copy_stream(recv + (r.off + s) * esz, seg.slot(r.set, j) + s * esz, l * esz);
      else
        std::memcpy(recv + (r.off + s) * esz, seg.slot(r.set, j) + s * esz, l * esz);
    }
  }

  const Segment& seg;
  const OpDesc& d;
  const std::uint8_t* send;
  std::uint8_t* recv;
  const int me, n;
  const std::size_t esz, align, piece_cap, round_cap;
  std::size_t n_rounds = 0;
  const std::uint64_t first;
  const int div;
  const bool stream;
  std::vector<const void*>& srcs;
};

// After sync t: copy out round t-1, reduce round t, copy in round t+1; then sync t+1. A buffer is
// written again only in round t+3, after sync t+2, by which every rank has left round t.
void Slots::allreduce_pipelined(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  Rounds rounds(*this, d, send, recv);
  rounds.copy_in(rounds.geometry(0));
  for (std::size_t t = 0; t < rounds.n_rounds; ++t) {
    barrier_.sync(d);
    if (t > 0) rounds.copy_out(rounds.geometry(t - 1));
    rounds.reduce_own(rounds.geometry(t));
    if (t + 1 < rounds.n_rounds) rounds.copy_in(rounds.geometry(t + 1));
  }
  barrier_.sync(d);
  rounds.copy_out(rounds.geometry(rounds.n_rounds - 1));
  if (rounds.stream) stream_fence();
}

void Slots::broadcast(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  const int root = d.root;
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  const std::size_t buf = seg_.layout().buf_bytes;
  if (n_ == 1 || bytes == 0) {
    barrier_.sync(d);
    if (bytes != 0 && send != recv) std::memmove(recv, send, bytes);
    return;
  }
  for (std::size_t off = 0; off < bytes; off += buf) {
    const std::size_t len = std::min(buf, bytes - off);
    const int set = next_set();
    if (me_ == root) std::memcpy(seg_.slot(set, root), send + off, len);
    barrier_.sync(d);
    if (me_ != root) std::memcpy(recv + off, seg_.slot(set, root), len);
  }
  if (me_ == root && send != recv) std::memmove(recv, send, bytes);
}

void Slots::allgather(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  const std::size_t buf = seg_.layout().buf_bytes;
  if (bytes == 0) {
    barrier_.sync(d);
    return;
  }
  for (std::size_t off = 0; off < bytes; off += buf) {
    const std::size_t len = std::min(buf, bytes - off);
    const int set = next_set();
    std::memcpy(seg_.slot(set, me_), send + off, len);
    barrier_.sync(d);
    for (int j = 0; j < n_; ++j) {
      std::uint8_t* dst = recv + static_cast<std::size_t>(j) * bytes + off;
      if (j == me_ && dst == send + off) continue;
      std::memcpy(dst, seg_.slot(set, j), len);
    }
  }
}

void Slots::reduce_scatter(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  const std::size_t esz = dtype_size(d.dtype);
  const int div = d.op == DTRAIN_AVG ? n_ : 1;
  if (d.count == 0 || n_ == 1) {
    barrier_.sync(d);
    if (d.count != 0) {
      const void* one[1] = {send};
      reduce_n(one, 1, recv, nullptr, d.count, d.dtype, d.op, 1);
    }
    return;
  }
  const std::size_t piece_cap =
      (seg_.layout().buf_bytes / static_cast<std::size_t>(n_)) / esz / (64 / esz) * (64 / esz);
  for (std::size_t off = 0; off < d.count; off += piece_cap) {
    const std::size_t len = std::min(piece_cap, d.count - off);
    const int set = next_set();
    std::uint8_t* mine = seg_.slot(set, me_);
    for (int j = 0; j < n_; ++j)
      if (j != me_)
        std::memcpy(mine + static_cast<std::size_t>(j) * piece_cap * esz,
                    send + (static_cast<std::size_t>(j) * d.count + off) * esz, len * esz);
    barrier_.sync(d);
    for (int j = 0; j < n_; ++j)
      srcs_[static_cast<std::size_t>(j)] =
          j == me_ ? send + (static_cast<std::size_t>(me_) * d.count + off) * esz
                   : seg_.slot(set, j) + static_cast<std::size_t>(me_) * piece_cap * esz;
    reduce_n(srcs_.data(), n_, recv + off * esz, nullptr, len, d.dtype, d.op, div);
  }
}

}  // namespace dtrain::coll::shm
