#include "hier_engine.hpp"

#include <fmt/format.h>

namespace dtrain::coll::hier {

Engine::Engine(const Options& o)
    : size_(static_cast<int>(o.all.members.size())), host_(o.host), all_(o.all) {
  rdzv::Store& store = *o.all.store;
  const std::string& prefix = o.all.key_prefix;
  store.set(fmt::format("{}lr/{}", prefix, o.all.rank), rdzv::as_bytes(std::to_string(host_.local_rank())));
  std::vector<int> leaders;
  for (int r = 0; r < size_; ++r) {
    auto v = rdzv::to_string(store.get(fmt::format("{}lr/{}", prefix, r), o.all.timeout));
    if (v == "0") leaders.push_back(r);
  }
  if (leader()) leaders_ = std::make_unique<tcp::Group>(all_.mesh(), std::move(leaders));
}

void Engine::abort(dtrain_status_t status, const std::string& msg) noexcept {
  host_.abort(status, msg);
  all_.abort(status, msg);
}

void Engine::barrier(const OpDesc& d) {
  host_.barrier(d);
  if (leaders_) leaders_->barrier(d);
  host_.barrier(d);
}

void Engine::allreduce(const OpDesc& d, const void* send, void* recv) {
  const Staging::Work w = all_.staging().begin(send, recv, d.count, d.dtype);
  OpDesc local = d;
  local.dtype = w.dtype;
  local.op = d.op == DTRAIN_AVG ? DTRAIN_SUM : d.op;
  host_.allreduce(local, w.buf, w.buf);
  if (leaders_) leaders_->allreduce(d, w.buf, d.count, w.dtype, d.op, d.op == DTRAIN_AVG ? size_ : 1);
  OpDesc back = d;
  back.kind = OpKind::broadcast;
  back.dtype = w.dtype;
  host_.broadcast(back, w.buf, w.buf);
  Staging::finish(w, recv, d.count, d.dtype);
}

}  // namespace dtrain::coll::hier
