#include "comm.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "dtrain/common/log.hpp"
#include "dtrain/common/params.hpp"
#include "dtrain/rendezvous/client.hpp"
#include "reduce.hpp"
#include "transport/shm/shm_engine.hpp"
#include "transport/tcp/tcp_engine.hpp"

namespace dtrain::coll {
namespace {

bool is_half(dtrain_dtype_t t) { return t == DTRAIN_FLOAT16 || t == DTRAIN_BFLOAT16; }

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 32) break;
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  }
  return out.empty() ? "run" : out;
}

}  // namespace

void apply_params(CommConfig& cfg, double timeout_s_override) {
  double t = timeout_s_override > 0 ? timeout_s_override : param_double("DTRAIN_COLL_TIMEOUT_S");
  if (!(t > 0)) throw ConfigError(fmt::format("DTRAIN_COLL_TIMEOUT_S={}: the deadline must be > 0 seconds", t));
  cfg.timeout = std::chrono::milliseconds(static_cast<long long>(t * 1000.0));
  if (cfg.transport.empty()) cfg.transport = param_string("DTRAIN_TRANSPORT");
  if (cfg.transport != "auto" && cfg.transport != "tcp" && cfg.transport != "shm")
    throw ConfigError(fmt::format("DTRAIN_TRANSPORT={}: expected auto, shm or tcp", cfg.transport));
  auto positive = [](const char* name, std::int64_t lo) {
    std::int64_t v = param_int(name);
    if (v < lo) throw ConfigError(fmt::format("{}={}: must be at least {}", name, v, lo));
    return v;
  };
  cfg.shm_slot_bytes = static_cast<std::size_t>(positive("DTRAIN_SHM_SLOT_BYTES", 4096));
  cfg.tcp_chunk_bytes = static_cast<std::size_t>(positive("DTRAIN_TCP_CHUNK_BYTES", 4096));
  cfg.spin_us = static_cast<int>(std::min<std::int64_t>(positive("DTRAIN_COLL_SPIN_US", 0), 1000000));
}

Communicator::Communicator(const CommConfig& cfg_in, std::shared_ptr<rdzv::Store> store)
    : cfg_(cfg_in), store_(std::move(store)) {
  if (cfg_.size < 1 || cfg_.rank < 0 || cfg_.rank >= cfg_.size)
    throw CollError(DTRAIN_ERR_CONFIG, fmt::format("rank {} is outside world size {}", cfg_.rank, cfg_.size));
  if (cfg_.local_rank < 0 || cfg_.local_size < 0) {
    cfg_.local_rank = cfg_.rank;
    cfg_.local_size = cfg_.size;
  }
  if (cfg_.local_size < 1 || cfg_.local_rank >= cfg_.local_size || cfg_.local_size > cfg_.size ||
      cfg_.rank - cfg_.local_rank < 0 || cfg_.rank - cfg_.local_rank + cfg_.local_size > cfg_.size)
    throw CollError(DTRAIN_ERR_CONFIG,
                    fmt::format("local rank {} of {} does not fit rank {} of {} (ranks of a node must be "
                                "contiguous: LOCAL_RANK/LOCAL_WORLD_SIZE vs RANK/WORLD_SIZE)",
                                cfg_.local_rank, cfg_.local_size, cfg_.rank, cfg_.size));
  DTRAIN_CHECK(store_ != nullptr, "no store");
  for (int r = 0; r < cfg_.size; ++r) all_.push_back(r);

  if (cfg_.size == 1)
    mode_ = Mode::self;
  else if (cfg_.transport == "tcp" || cfg_.local_size == 1)
    mode_ = Mode::tcp;
  else if (cfg_.local_size == cfg_.size)
    mode_ = Mode::shm;
  else
    mode_ = Mode::hier;

  // Keys of this communicator: the n-th communicator a rank creates in this run and generation.
  const std::int64_t instance = store_->add(fmt::format("coll/instance/{}", cfg_.rank), 1);
  const std::string prefix = fmt::format("coll/{}/", instance);
  const int node = cfg_.rank - cfg_.local_rank;

  if (mode_ == Mode::shm || mode_ == Mode::hier) {
    shm::Options o;
    o.local_rank = cfg_.local_rank;
    for (int j = 0; j < cfg_.local_size; ++j) o.global_ranks.push_back(node + j);
    o.store = store_.get();
    o.key_prefix = fmt::format("{}node{}/", prefix, node);
    o.name_prefix = fmt::format("dtrain-{}-g{}", sanitize(cfg_.run_id), cfg_.generation);
    o.timeout = cfg_.timeout;
    o.slot_bytes = cfg_.shm_slot_bytes;
    o.spin_us = cfg_.spin_us;
    shm_ = std::make_unique<shm::Engine>(o);
  }
  if (mode_ == Mode::tcp || mode_ == Mode::hier) {
    tcp::Options o;
    o.rank = cfg_.rank;
    o.size = cfg_.size;
    o.store = store_.get();
    o.key_prefix = prefix;
    o.timeout = cfg_.timeout;
    o.chunk_bytes = cfg_.tcp_chunk_bytes;
    o.advertise_host = cfg_.advertise;
    if (o.advertise_host.empty()) o.advertise_host = param_string("DTRAIN_SOCKET_ADDR");
    if (o.advertise_host.empty())
      if (const char* v = std::getenv("DTRAIN_LOCAL_ADDR"); v != nullptr) o.advertise_host = v;
    if (o.advertise_host.empty())
      if (auto* ts = dynamic_cast<rdzv::TcpStore*>(store_.get())) o.advertise_host = ts->local_address();
    if (o.advertise_host.empty()) o.advertise_host = "127.0.0.1";
    tcp_ = std::make_unique<tcp::Engine>(o);
  }
  if (mode_ == Mode::hier) {
    store_->set(fmt::format("{}lr/{}", prefix, cfg_.rank), rdzv::as_bytes(std::to_string(cfg_.local_rank)));
    for (int r = 0; r < cfg_.size; ++r) {
      auto v = rdzv::to_string(store_->get(fmt::format("{}lr/{}", prefix, r), cfg_.timeout));
      if (v == "0") leaders_.push_back(r);
    }
  }
  DTRAIN_INFO(coll, "rank {}/{} (local {}/{}): {} engine", cfg_.rank, cfg_.size, cfg_.local_rank, cfg_.local_size,
              engine_name());
}

Communicator::~Communicator() = default;

const char* Communicator::engine_name() const {
  switch (mode_) {
    case Mode::self: return "self";
    case Mode::shm: return "shm";
    case Mode::tcp: return "tcp";
    case Mode::hier: return "hierarchical";
  }
  return "?";
}

void Communicator::check_usable() const {
  if (failed_)
    throw CollError(DTRAIN_ERR_ABORTED,
                    fmt::format("the communicator failed earlier and cannot be used; destroy it (first error: {})",
                                failure_));
}

OpDesc Communicator::next(OpKind kind, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root) {
  check_usable();
  if (!valid_dtype(dtype))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: invalid dtype {}", op_kind_name(kind),
                                                             static_cast<int>(dtype)));
  if ((kind == OpKind::allreduce || kind == OpKind::reduce_scatter) && !valid_redop(op))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("{}: invalid reduction op {}", op_kind_name(kind), static_cast<int>(op)));
  if (kind == OpKind::broadcast && (root < 0 || root >= cfg_.size))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("broadcast: root {} is outside world size {}", root, cfg_.size));
  OpDesc d;
  d.seq = ++seq_;
  d.kind = kind;
  d.dtype = dtype;
  d.op = (kind == OpKind::allreduce || kind == OpKind::reduce_scatter) ? op : DTRAIN_SUM;
  d.root = kind == OpKind::broadcast ? root : 0;
  d.count = count;
  d.deadline = Clock::now() + cfg_.timeout;
  return d;
}

void Communicator::mark_failed(dtrain_status_t status, const std::string& msg) noexcept {
  if (!failed_) {
    failed_ = true;
    failure_ = msg;
  }
  if (shm_) shm_->abort(status, msg);
  if (tcp_) tcp_->abort(status, msg);
}

template <class F>
void Communicator::run(const OpDesc&, F&& body) {
  try {
    body();
  } catch (const CollError& e) {
    mark_failed(e.status(), e.what());
    throw;
  } catch (const TimeoutError& e) {
    mark_failed(DTRAIN_ERR_TIMEOUT, e.what());
    throw CollError(DTRAIN_ERR_TIMEOUT, e.what());
  } catch (const std::exception& e) {
    mark_failed(DTRAIN_ERR_INTERNAL, e.what());
    throw;
  }
}

std::uint8_t* Communicator::work(std::size_t bytes) {
  if (work_.size() < bytes) work_.resize(bytes);
  return work_.data();
}

namespace {
void need(const void* p, std::size_t count, const char* what, OpKind kind) {
  if (p == nullptr && count != 0)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: {} is NULL with a count of {}", op_kind_name(kind),
                                                             what, count));
}
}  // namespace

void Communicator::allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op) {
  OpDesc d = next(OpKind::allreduce, count, dtype, op, 0);
  need(send, count, "sendbuf", d.kind);
  need(recv, count, "recvbuf", d.kind);
  run(d, [&] {
    const std::size_t esz = dtype_size(dtype);
    switch (mode_) {
      case Mode::self:
        if (count && send != recv) std::memmove(recv, send, count * esz);
        return;
      case Mode::shm: shm_->allreduce(d, send, recv); return;
      case Mode::tcp:
      case Mode::hier: break;
    }
    // Work buffer: float32 for half types (float32 accumulation across the whole path).
    void* w = recv;
    dtrain_dtype_t wt = dtype;
    if (is_half(dtype)) {
      auto* f = reinterpret_cast<float*>(work(count * sizeof(float)));
      widen_to_float(send, f, count, dtype);
      w = f;
      wt = DTRAIN_FLOAT32;
    } else if (count && send != recv) {
      std::memmove(recv, send, count * esz);
    }
    const int div = op == DTRAIN_AVG ? cfg_.size : 1;
    if (mode_ == Mode::tcp) {
      tcp_->allreduce(d, all_, w, count, wt, op, div);
    } else {
      OpDesc local = d;
      local.dtype = wt;
      local.op = op == DTRAIN_AVG ? DTRAIN_SUM : op;
      shm_->allreduce(local, w, w);
      if (cfg_.local_rank == 0) tcp_->allreduce(d, leaders_, w, count, wt, op, div);
      OpDesc back = d;
      back.kind = OpKind::broadcast;
      back.dtype = wt;
      shm_->broadcast(back, w, w, 0);
    }
    if (is_half(dtype)) narrow_from_float(static_cast<const float*>(w), recv, count, dtype);
  });
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::broadcast, count, dtype, DTRAIN_SUM, root);
  if (cfg_.rank == root) need(send, count, "sendbuf (at the root)", d.kind);
  need(recv, count, "recvbuf", d.kind);
  run(d, [&] {
    const std::size_t bytes = count * dtype_size(dtype);
    switch (mode_) {
      case Mode::self:
        if (bytes && send != recv) std::memmove(recv, send, bytes);
        return;
      case Mode::shm: shm_->broadcast(d, send, recv, root); return;
      case Mode::tcp:
      case Mode::hier:
        if (cfg_.rank == root && bytes && send != recv) std::memmove(recv, send, bytes);
        tcp_->broadcast(d, all_, recv, bytes, root);
        return;
    }
  });
}

void Communicator::allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype) {
  OpDesc d = next(OpKind::allgather, sendcount, dtype, DTRAIN_SUM, 0);
  need(send, sendcount, "sendbuf", d.kind);
  need(recv, sendcount, "recvbuf", d.kind);
  run(d, [&] {
    const std::size_t bytes = sendcount * dtype_size(dtype);
    auto* own = static_cast<std::uint8_t*>(recv) + static_cast<std::size_t>(cfg_.rank) * bytes;
    switch (mode_) {
      case Mode::self:
        if (bytes && send != recv) std::memmove(recv, send, bytes);
        return;
      case Mode::shm: shm_->allgather(d, send, recv); return;
      case Mode::tcp:
      case Mode::hier:
        if (bytes && send != own) std::memmove(own, send, bytes);
        tcp_->allgather(d, all_, recv, bytes);
        return;
    }
  });
}

void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                                  dtrain_op_t op) {
  OpDesc d = next(OpKind::reduce_scatter, recvcount, dtype, op, 0);
  need(send, recvcount, "sendbuf", d.kind);
  need(recv, recvcount, "recvbuf", d.kind);
  run(d, [&] {
    const std::size_t esz = dtype_size(dtype);
    const std::size_t total = recvcount * static_cast<std::size_t>(cfg_.size);
    switch (mode_) {
      case Mode::self:
        if (recvcount && send != recv) std::memmove(recv, send, recvcount * esz);
        return;
      case Mode::shm: shm_->reduce_scatter(d, send, recv); return;
      case Mode::tcp:
      case Mode::hier: break;
    }
    const int div = op == DTRAIN_AVG ? cfg_.size : 1;
    if (is_half(dtype)) {
      auto* f = reinterpret_cast<float*>(work((total + recvcount) * sizeof(float)));
      widen_to_float(send, f, total, dtype);
      float* out = f + total;
      tcp_->reduce_scatter(d, all_, f, out, recvcount, DTRAIN_FLOAT32, op, div);
      narrow_from_float(out, recv, recvcount, dtype);
    } else {
      std::uint8_t* w = work(total * esz);
      if (total) std::memcpy(w, send, total * esz);
      tcp_->reduce_scatter(d, all_, w, recv, recvcount, dtype, op, div);
    }
  });
}

void Communicator::barrier() {
  OpDesc d = next(OpKind::barrier, 0, DTRAIN_UINT8, DTRAIN_SUM, 0);
  run(d, [&] {
    switch (mode_) {
      case Mode::self: return;
      case Mode::shm: shm_->barrier(d); return;
      case Mode::tcp: tcp_->barrier(d, all_); return;
      case Mode::hier:
        shm_->barrier(d);
        if (cfg_.local_rank == 0) tcp_->barrier(d, leaders_);
        shm_->barrier(d);
        return;
    }
  });
}

}  // namespace dtrain::coll
