// The TCP engine: each call staged and routed to its collaborators (tcp_engine.hpp).
#include "tcp_engine.hpp"

#include <cstring>
#include <numeric>

#include "../../reduce.hpp"

namespace dtrain::coll::tcp {
namespace {
std::vector<int> every_rank(int n) {
  std::vector<int> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}
}  // namespace

Engine::Engine(const Options& o)
    : links_(Bootstrap(o).connect()),
      inbox_(static_cast<std::size_t>(links_.size())),
      failures_(links_, *o.store, o.key_prefix, o.timeout),
      channel_(links_, inbox_, failures_, o.chunk_bytes, o.spin_us),
      p2p_(links_, inbox_, failures_),
      all_(channel_, every_rank(links_.size())) {}

void Engine::barrier(const OpDesc& d) {
  all_.barrier(d);
  failures_.confirm(d);
}

void Engine::allreduce(const OpDesc& d, const void* send, void* recv) {
  const int div = d.op == DTRAIN_AVG ? links_.size() : 1;
  if (!is_half(d.dtype)) {
    all_.allreduce(d, send, recv, d.count, d.dtype, d.op, div);
  } else {
    const Staging::Work w = staging_.begin(send, recv, d.count, d.dtype);  // float32, reduced in place
    all_.allreduce(d, w.buf, w.buf, d.count, w.dtype, d.op, div);
    Staging::finish(w, recv, d.count, d.dtype);
  }
  failures_.confirm(d);
}

void Engine::broadcast(const OpDesc& d, const void* send, void* recv) {
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  if (links_.rank() == d.root && bytes && send != recv) std::memmove(recv, send, bytes);
  all_.broadcast(d, recv, bytes, d.root);
  failures_.confirm(d);
}

void Engine::allgather(const OpDesc& d, const void* send, void* recv) {
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  auto* own = static_cast<std::uint8_t*>(recv) + static_cast<std::size_t>(links_.rank()) * bytes;
  if (bytes && send != own) std::memmove(own, send, bytes);
  all_.allgather(d, recv, bytes);
  failures_.confirm(d);
}

void Engine::reduce_scatter(const OpDesc& d, const void* send, void* recv) {
  const std::size_t esz = dtype_size(d.dtype);
  const std::size_t total = d.count * static_cast<std::size_t>(links_.size());
  const int div = d.op == DTRAIN_AVG ? links_.size() : 1;
  if (is_half(d.dtype)) {
    auto* f = reinterpret_cast<float*>(staging_.bytes((total + d.count) * sizeof(float)));
    widen_to_float(send, f, total, d.dtype);
    float* out = f + total;
    all_.reduce_scatter(d, f, f, out, d.count, DTRAIN_FLOAT32, d.op, div);
    narrow_from_float(out, recv, d.count, d.dtype);
  } else {
    all_.reduce_scatter(d, send, staging_.bytes(total * esz), recv, d.count, d.dtype, d.op, div);
  }
  failures_.confirm(d);
}

}  // namespace dtrain::coll::tcp
