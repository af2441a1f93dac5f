// The algorithm matrix with ranks as threads: world sizes 1-8 x counts x every dtype x every op on
// the shared-memory, TCP and hierarchical engines, against a float64 reference; every rank must
// produce the same bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <mutex>

#include <fmt/format.h>

#include "harness.hpp"
#include "reduce.hpp"

namespace {

constexpr dtrain_op_t kOps[] = {DTRAIN_SUM, DTRAIN_PROD, DTRAIN_MIN, DTRAIN_MAX, DTRAIN_AVG};

void put(void* buf, std::size_t i, dtrain_dtype_t t, double v) {
  switch (t) {
    case DTRAIN_INT8: static_cast<std::int8_t*>(buf)[i] = static_cast<std::int8_t>(v); break;
    case DTRAIN_UINT8: static_cast<std::uint8_t*>(buf)[i] = static_cast<std::uint8_t>(v); break;
    case DTRAIN_INT32: static_cast<std::int32_t*>(buf)[i] = static_cast<std::int32_t>(v); break;
    case DTRAIN_INT64: static_cast<std::int64_t*>(buf)[i] = static_cast<std::int64_t>(v); break;
    case DTRAIN_FLOAT16: static_cast<std::uint16_t*>(buf)[i] = float_to_half(static_cast<float>(v)); break;
    case DTRAIN_BFLOAT16: static_cast<std::uint16_t*>(buf)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DTRAIN_FLOAT32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DTRAIN_FLOAT64: static_cast<double*>(buf)[i] = v; break;
    case DTRAIN_BOOL: static_cast<std::uint8_t*>(buf)[i] = v != 0 ? 1 : 0; break;
    case DTRAIN_INT16: static_cast<std::int16_t*>(buf)[i] = static_cast<std::int16_t>(v); break;
  }
}

double get(const void* buf, std::size_t i, dtrain_dtype_t t) {
  switch (t) {
    case DTRAIN_INT8: return static_cast<const std::int8_t*>(buf)[i];
    case DTRAIN_UINT8: return static_cast<const std::uint8_t*>(buf)[i];
    case DTRAIN_INT32: return static_cast<const std::int32_t*>(buf)[i];
    case DTRAIN_INT64: return static_cast<double>(static_cast<const std::int64_t*>(buf)[i]);
    case DTRAIN_FLOAT16: return static_cast<double>(half_to_float(static_cast<const std::uint16_t*>(buf)[i]));
    case DTRAIN_BFLOAT16: return static_cast<double>(bf16_to_float(static_cast<const std::uint16_t*>(buf)[i]));
    case DTRAIN_FLOAT32: return static_cast<double>(static_cast<const float*>(buf)[i]);
    case DTRAIN_FLOAT64: return static_cast<const double*>(buf)[i];
    case DTRAIN_BOOL: return static_cast<const std::uint8_t*>(buf)[i];
    case DTRAIN_INT16: return static_cast<const std::int16_t*>(buf)[i];
  }
  return 0;
}

bool is_int(dtrain_dtype_t t) { return t <= DTRAIN_INT64; }

// Inputs small enough that sums and products are exact in every dtype.
double input(int rank, std::size_t i, dtrain_dtype_t t, dtrain_op_t op) {
  const auto k = static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 3) % 9);
  if (op == DTRAIN_PROD) {
    int m = static_cast<int>((i + static_cast<std::size_t>(rank)) % 4);
    return m == 0 ? 2.0 : (m == 1 && t != DTRAIN_UINT8 ? -1.0 : 1.0);
  }
  return t == DTRAIN_UINT8 ? k : k - 4;
}

// `count` elements of rank's input into buf (as put() would, one by one): inputs repeat every 36
// elements, so the first period is put and then copied.
void fill(std::uint8_t* buf, std::size_t count, dtrain_dtype_t t, int rank, dtrain_op_t op) {
  const std::size_t esz = dtype_size(t), period = std::min<std::size_t>(count, 36);
  for (std::size_t i = 0; i < period; ++i) put(buf, i, t, input(rank, i, t, op));
  for (std::size_t done = period; done < count;) {
    const std::size_t n = std::min(done, count - done);
    std::memcpy(buf + done * esz, buf, n * esz);
    done += n;
  }
}

double reference(int n, std::size_t i, dtrain_dtype_t t, dtrain_op_t op) {
  double acc = input(0, i, t, op);
  for (int r = 1; r < n; ++r) {
    double x = input(r, i, t, op);
    switch (op) {
      case DTRAIN_SUM:
      case DTRAIN_AVG: acc += x; break;
      case DTRAIN_PROD: acc *= x; break;
      case DTRAIN_MIN: acc = std::min(acc, x); break;
      case DTRAIN_MAX: acc = std::max(acc, x); break;
      case DTRAIN_BAND:
      case DTRAIN_BOR:
      case DTRAIN_BXOR:
      case DTRAIN_PREMUL_SUM: break;  // not in kOps
    }
  }
  if (op == DTRAIN_AVG) acc = is_int(t) ? std::trunc(acc / n) : acc / n;
  return acc;
}

double tolerance(dtrain_dtype_t t, double ref) {
  switch (t) {
    case DTRAIN_FLOAT16: return 1e-3 * std::fabs(ref) + 1e-3;
    case DTRAIN_BFLOAT16: return 8e-3 * std::fabs(ref) + 8e-3;
    case DTRAIN_FLOAT32: return 1e-6 * std::fabs(ref);
    case DTRAIN_FLOAT64: return 1e-12 * std::fabs(ref);
    default: return 0;
  }
}

// FNV-1a over 8-byte words (and the tail's bytes): ranks compare their results' bits.
std::uint64_t fnv(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const std::uint8_t*>(p);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

struct Results {
  std::mutex mu;
  std::vector<std::string> wrong;
  std::map<std::string, std::vector<std::uint64_t>> hashes;  // per call, per rank
  void bad(std::string s) {
    std::lock_guard l(mu);
    if (wrong.size() < 20) wrong.push_back(std::move(s));
  }
  void hash(const std::string& call, int n, int r, std::uint64_t h) {
    std::lock_guard l(mu);
    auto& v = hashes[call];
    v.resize(static_cast<std::size_t>(n));
    v[static_cast<std::size_t>(r)] = h;
  }
};

constexpr std::size_t kScatterBlocks[] = {0, 1, 5, 1000};

std::vector<std::size_t> counts_for(dtrain_dtype_t t, dtrain_op_t op) {
  std::vector<std::size_t> c = {0, 1, 3, 4, 1000, 12345};
  if ((t == DTRAIN_FLOAT32 && op == DTRAIN_SUM) || (t == DTRAIN_BFLOAT16 && op == DTRAIN_AVG) ||
      (t == DTRAIN_INT32 && op == DTRAIN_MAX)) {
    c.push_back(1 << 20);
    c.push_back((1 << 20) + 3);
  }
  return c;
}

// reference() of every element the matrix checks, per (dtype, op), computed once per world size
// instead of by every rank.
using References = std::map<std::pair<int, int>, std::vector<double>>;
References references_for(int n) {
  References refs;
  for (auto t : kAllDtypes)
    for (auto op : kOps) {
      std::size_t most = kScatterBlocks[3] * static_cast<std::size_t>(n);
      for (std::size_t c : counts_for(t, op)) most = std::max(most, c);
      auto& v = refs[{t, op}];
      v.resize(most);
      for (std::size_t i = 0; i < most; ++i) v[i] = reference(n, i, t, op);
    }
  return refs;
}

void matrix(Communicator& comm, int r, const References& refs, Results& res) {
  const int n = comm.size();
  std::vector<std::uint8_t> send, recv;
  int call = 0;
  for (auto t : kAllDtypes) {
    const std::size_t esz = dtype_size(t);
    for (auto op : kOps) {
      const std::vector<double>& ref = refs.at({t, op});
      for (std::size_t count : counts_for(t, op)) {
        const bool in_place = (++call % 2) == 0;
        send.assign(count * esz + 8, 0);
        recv.assign(count * esz + 8, 0xEE);
        fill(send.data(), count, t, r, op);
        void* out = in_place ? send.data() : recv.data();
        comm.allreduce(send.data(), out, count, t, op);
        std::string name = fmt::format("allreduce {} {} count {}{}", dtype_name(t), op_name(op), count,
                                       in_place ? " in place" : "");
        for (std::size_t i = 0; i < count; ++i) {
          double want = ref[i], got = get(out, i, t);
          if (std::fabs(want - got) > tolerance(t, want)) {
            res.bad(fmt::format("rank {} of {}: {}: [{}] = {} want {}", r, n, name, i, got, want));
            break;
          }
        }
        if (!in_place && recv[count * esz] != 0xEE) res.bad(fmt::format("rank {}: {} wrote past the end", r, name));
        res.hash(name, n, r, fnv(out, count * esz));
      }
      // reduce_scatter: rank r's block of a size*m buffer.
      for (std::size_t m : kScatterBlocks) {
        const std::size_t total = m * static_cast<std::size_t>(n);
        send.assign(total * esz, 0);
        recv.assign(m * esz, 0);
        fill(send.data(), total, t, r, op);
        comm.reduce_scatter(send.data(), recv.data(), m, t, op);
        for (std::size_t i = 0; i < m; ++i) {
          const std::size_t gi = static_cast<std::size_t>(r) * m + i;
          double want = ref[gi], got = get(recv.data(), i, t);
          if (std::fabs(want - got) > tolerance(t, want)) {
            res.bad(fmt::format("rank {} of {}: reduce_scatter {} {} m {}: [{}] = {} want {}", r, n, dtype_name(t),
                                op_name(op), m, i, got, want));
            break;
          }
        }
      }
    }
    // broadcast from the first and the last rank; allgather.
    for (int root : {0, n - 1}) {
      for (std::size_t count : {std::size_t{0}, std::size_t{3}, std::size_t{1000}, std::size_t{300001}}) {
        recv.assign(count * esz, 0);
        send.assign(count * esz, 0);
        fill(send.data(), count, t, root, DTRAIN_SUM);  // what every rank must get
        if (r == root) recv = send;
        comm.broadcast(recv.data(), recv.data(), count, t, root);
        if (recv != send)
          res.bad(fmt::format("rank {} of {}: broadcast {} root {} count {}: wrong", r, n, dtype_name(t), root, count));
      }
    }
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000}, std::size_t{70001}}) {
      send.assign(count * esz, 0);
      recv.assign(count * esz * static_cast<std::size_t>(n), 0);
      fill(send.data(), count, t, r, DTRAIN_SUM);
      const bool in_place = count == 1000;
      if (in_place) std::memcpy(recv.data() + static_cast<std::size_t>(r) * count * esz, send.data(), count * esz);
      comm.allgather(in_place ? recv.data() + static_cast<std::size_t>(r) * count * esz : send.data(), recv.data(),
                     count, t);
      std::vector<std::uint8_t> block(count * esz);
      for (int j = 0; j < n; ++j) {
        fill(block.data(), count, t, j, DTRAIN_SUM);
        if (count != 0 && std::memcmp(recv.data() + static_cast<std::size_t>(j) * count * esz, block.data(), count * esz) != 0) {
          res.bad(fmt::format("rank {} of {}: allgather {} count {}: block {} wrong", r, n, dtype_name(t), count, j));
          break;
        }
      }
    }
  }
  comm.barrier();
}

void run_matrix(const World& w) {
  Results res;
  const References refs = references_for(w.size);
  auto errors = run_ranks(w, [&](Communicator& c, int r) { matrix(c, r, refs, res); });
  for (int r = 0; r < w.size; ++r) CHECK_MESSAGE(errors[static_cast<std::size_t>(r)].empty(), "rank ", r, ": ",
                                                 errors[static_cast<std::size_t>(r)]);
  for (auto& s : res.wrong) FAIL_CHECK(s);
  int differing = 0;
  for (auto& [name, hs] : res.hashes)
    for (auto h : hs)
      if (h != hs[0] && differing++ < 5) FAIL_CHECK("ranks disagree bitwise on ", name);
  CHECK(differing == 0);
}

}  // namespace

TEST_SUITE("collectives::comm") {
  TEST_CASE("shared memory: world sizes 1-8") {
    for (int n = 1; n <= 8; ++n) {
      CAPTURE(n);
      World w;
      w.size = n;
      w.slot_bytes = 64 * 1024;  // several pipelined rounds already at moderate counts
      run_matrix(w);
    }
  }

  TEST_CASE("tcp: world sizes 2-8") {
    for (int n : {2, 3, 4, 5, 8}) {
      CAPTURE(n);
      World w;
      w.size = n;
      w.transport = "tcp";
      run_matrix(w);
    }
  }

  TEST_CASE("hierarchical: several nodes with several ranks each") {
    for (auto [n, local] : {std::pair{4, 2}, std::pair{6, 3}, std::pair{6, 2}}) {
      CAPTURE(n);
      CAPTURE(local);
      World w;
      w.size = n;
      w.local_size = local;
      run_matrix(w);
    }
  }
}
