#include "hier_engine.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "store_value.hpp"

namespace dtrain::coll::hier {

Engine::Engine(const Options& o)
    : size_(static_cast<int>(o.all.members.size())),
      node_(o.node),
      host_(o.node.size() > 1 ? std::make_unique<shm::Engine>(o.host) : nullptr),
      all_(o.all) {
  rdzv::Store& store = *o.all.store;
  const std::string& prefix = o.all.key_prefix;
  store.set(fmt::format("{}lr/{}", prefix, o.all.rank), rdzv::as_bytes(std::to_string(host_ ? host_->local_rank() : 0)));
  std::vector<int> leaders;
  for (int r = 0; r < size_; ++r) {
    const std::string key = fmt::format("{}lr/{}", prefix, r);
    const std::string v = rdzv::to_string(store.get(key, o.all.timeout));
    int local = -1;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), local);
    if (ec != std::errc() || end != v.data() + v.size() || local < 0)  // a junk leader set would hang the job
      throw CollError(DTRAIN_ERR_PEER,
                      fmt::format("hierarchical engine setup: {}",
                                  junk_value_text(key, rdzv::as_bytes(v),
                                                  fmt::format("rank {}'s local rank (a number >= 0)",
                                                              o.all.members[static_cast<std::size_t>(r)]))));
    if (local == 0) leaders.push_back(r);
  }
  if (leader()) leaders_ = std::make_unique<tcp::Group>(all_.channel(), std::move(leaders));
}

void Engine::abort(dtrain_status_t status, const std::string& msg) noexcept {
  if (host_) host_->abort(status, msg);
  all_.abort(status, msg);
}

void Engine::barrier(const OpDesc& d) {
  if (host_) host_->barrier(d);
  if (leaders_) {
    leaders_->barrier(d);
    all_.confirm(d);
  }
  if (host_) host_->barrier(d);
}

void Engine::allreduce(const OpDesc& d, const void* send, void* recv) {
  const Staging::Work w = all_.staging().begin(send, recv, d.count, d.dtype);
  OpDesc local = d;
  local.dtype = w.dtype;
  local.op = d.op == DTRAIN_AVG ? DTRAIN_SUM : d.op;
  if (host_) host_->allreduce(local, w.buf, w.buf);
  if (leaders_) {
    leaders_->allreduce(d, w.buf, w.buf, d.count, w.dtype, d.op, d.op == DTRAIN_AVG ? size_ : 1);
    all_.confirm(d);
  }
  OpDesc back = d;
  back.kind = OpKind::broadcast;
  back.root = 0;  // the host's leader (d may be a reduce to another root)
  back.dtype = w.dtype;
  if (host_) host_->broadcast(back, w.buf, w.buf);
  Staging::finish(w, recv, d.count, d.dtype);
}

int Engine::local_index(int group_rank) const {
  if (!host_) return -1;
  auto it = std::lower_bound(node_.begin(), node_.end(), group_rank);
  return it != node_.end() && *it == group_rank ? static_cast<int>(it - node_.begin()) : -1;
}

Engine::Peek Engine::peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) {
  const int local = local_index(peer);
  return local >= 0 ? host_->peek(local, fp0, fp1) : all_.peek(peer, fp0, fp1);
}

void Engine::sendrecv(const P2pMsg* out, const P2pMsg* in) {
  P2pMsg lo, li;  // the local directions, peers as local ranks
  const bool out_local = out != nullptr && local_index(out->peer) >= 0;
  const bool in_local = in != nullptr && local_index(in->peer) >= 0;
  if (out_local) {
    lo = *out;
    lo.peer = local_index(out->peer);
  }
  if (in_local) {
    li = *in;
    li.peer = local_index(in->peer);
  }
  if ((out == nullptr || out_local) && (in == nullptr || in_local)) {
    host_->sendrecv(out_local ? &lo : nullptr, in_local ? &li : nullptr);
  } else if (!out_local && !in_local) {
    all_.sendrecv(out, in);
  } else if (out_local) {
    mixed(&lo, true, in);
  } else {
    mixed(&li, false, out);
  }
}

// One direction through shared memory, the other through a socket: step both; when neither moves,
// poll the socket for a millisecond (the shm side checking its peer and the deadline), or, once the
// socket's direction is done, wait on the shm doorbell.
void Engine::mixed(const P2pMsg* local, bool local_sends, const P2pMsg* remote) {
  shm::Rings& rings = host_->rings();
  shm::Rings::Out so;
  shm::Rings::In si;
  (local_sends ? so.m : si.m) = local;
  tcp::P2p& net = all_.p2p();
  tcp::P2p::Xfer x;
  net.begin(x, local_sends ? nullptr : remote, local_sends ? remote : nullptr);
  rings.begin(so, si);
  struct End {
    shm::Rings& r;
    ~End() { r.end(); }
  } end{rings};
  while (!x.finished() || !so.finished() || !si.finished()) {
    const bool a = rings.step(so, si);
    if (net.step(x) || a) continue;
    if (x.finished()) {
      rings.wait(so, si);
    } else {
      rings.check(so, si);
      net.wait(x, so.finished() && si.finished() ? 1000 : 1);
    }
  }
}

}  // namespace dtrain::coll::hier
