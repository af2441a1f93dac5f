#include "comm.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "dtrain/common/log.hpp"
#include "dtrain/common/params.hpp"
#include "progress.hpp"
#include "reduce.hpp"

namespace dtrain::coll {
namespace {

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
  cfg.shm_p2p_bytes = static_cast<std::size_t>(positive("DTRAIN_SHM_P2P_BYTES", 16384));
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
  // Keys of this communicator: the n-th communicator a rank creates in this run and generation.
  const std::int64_t instance = store_->add(fmt::format("coll/instance/{}", cfg_.rank), 1);
  Group g;
  for (int r = 0; r < cfg_.size; ++r) g.members.push_back(r);
  g.rank = cfg_.rank;
  g.host = cfg_.rank - cfg_.local_rank;
  g.key_prefix = fmt::format("coll/{}/", instance);
  start(std::move(g));
}

Communicator::Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store, Group group)
    : cfg_(cfg), store_(std::move(store)) {
  start(std::move(group));
}

void Communicator::start(Group g) {
  init_timeout_ = cfg_.timeout;
  members_ = g.members;
  rank_ = g.rank;
  host_ = g.host;
  key_prefix_ = g.key_prefix;
  sent_.assign(members_.size(), 0);
  received_.assign(members_.size(), 0);
  parked_.assign(members_.size(), {});
  EngineOptions o;
  o.members = std::move(g.members);
  o.rank = g.rank;
  if (g.host_of.empty()) {  // the world: this host's ranks are contiguous
    for (int j = 0; j < cfg_.local_size; ++j) o.node.push_back(cfg_.rank - cfg_.local_rank + j);
  } else {
    for (std::size_t r = 0; r < g.host_of.size(); ++r)
      if (g.host_of[r] == host_) o.node.push_back(static_cast<int>(r));
  }
  o.host_of = std::move(g.host_of);
  o.kind = cfg_.transport;
  o.store = store_.get();
  o.key_prefix = key_prefix_;
  o.shm_name_prefix = fmt::format("dtrain-{}-g{}", sanitize(cfg_.run_id), cfg_.generation);
  o.advertise = cfg_.advertise;
  o.timeout = cfg_.timeout;
  o.shm_slot_bytes = cfg_.shm_slot_bytes;
  o.shm_p2p_bytes = cfg_.shm_p2p_bytes;
  o.tcp_chunk_bytes = cfg_.tcp_chunk_bytes;
  o.spin_us = cfg_.spin_us;
  engine_ = make_engine(o);
  DTRAIN_INFO(coll, "rank {}/{} (world rank {}, local {}/{}, keys {}): {} engine", rank_, size(), cfg_.rank,
              cfg_.local_rank, cfg_.local_size, key_prefix_, engine_name());
}

Communicator::~Communicator() = default;

void Communicator::check_usable() const {
  if (aborted_.load(std::memory_order_acquire))
    throw CollError(DTRAIN_ERR_ABORTED, fmt::format("the communicator was aborted: {}", abort_reason_));
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
  const bool reducing = kind == OpKind::allreduce || kind == OpKind::reduce_scatter || kind == OpKind::reduce;
  if (reducing) check_reduction(kind, dtype, op);
  const bool rooted = kind == OpKind::broadcast || kind == OpKind::reduce || kind == OpKind::gather ||
                      kind == OpKind::scatter;
  if (rooted && (root < 0 || root >= size()))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: root {} is not a rank of this communicator (size {})",
                                                             op_kind_name(kind), root, size()));
  OpDesc d;
  d.seq = ++seq_;
  d.kind = kind;
  d.dtype = dtype;
  d.premul = reducing && premul_.count(op) != 0;
  d.op = reducing && !d.premul ? op : DTRAIN_SUM;
  d.root = rooted ? root : 0;
  d.count = count;
  d.start = coarse_now();
  d.deadline = d.start + cfg_.timeout;
  return d;
}

void Communicator::check_reduction(OpKind kind, dtrain_dtype_t dtype, dtrain_op_t op) const {
  const char* what = op_kind_name(kind);
  auto refuse = [](const std::string& m) { throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, m); };
  if (premul_.count(op) != 0) {
    if (!is_floating(dtype))
      refuse(fmt::format("{}: a premultiplied sum takes a floating dtype (float16, bfloat16, float32, float64), not {}",
                         what, dtype_name(dtype)));
    return;
  }
  if (op == DTRAIN_PREMUL_SUM)
    refuse(fmt::format("{}: DTRAIN_PREMUL_SUM names the kind only; pass the op that "
                       "dtrain_redop_create_premul_sum gave for this communicator",
                       what));
  if (!valid_redop(op))
    refuse(fmt::format("{}: invalid reduction op {} (DTRAIN_SUM .. DTRAIN_BXOR, or a live handle from "
                       "dtrain_redop_create_premul_sum on this communicator)",
                       what, static_cast<int>(op)));
  if (is_bitwise(op) && is_floating(dtype))
    refuse(fmt::format("{}: {} is bitwise and takes integer or bool dtypes, not {}", what, op_name(op),
                       dtype_name(dtype)));
  if (op == DTRAIN_AVG && dtype == DTRAIN_BOOL)
    refuse(fmt::format("{}: avg of bool is not defined; use sum or bor (or), prod or band (and)", what));
}

dtrain_op_t Communicator::create_premul(double scale) {
  check_usable();
  if (!std::isfinite(scale))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("premul_sum: the scale {} is not finite", scale));
  if (next_premul_ == std::numeric_limits<int>::max())
    throw CollError(DTRAIN_ERR_SYSTEM, "premul_sum: this communicator has created all the ops it can");
  const int op = next_premul_++;
  premul_[op] = scale;
  return static_cast<dtrain_op_t>(op);
}

void Communicator::destroy_premul(dtrain_op_t op) {
  if (premul_.erase(static_cast<int>(op)) == 0)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("redop_destroy: op {} is not a live premultiplied sum of this communicator",
                                static_cast<int>(op)));
}

void Communicator::premultiply(const OpDesc& d, const void* src, void* dst, std::size_t count, dtrain_op_t op) {
  if (dst == nullptr) dst = const_cast<void*>(src);
  scale_n(src, dst, count, d.dtype, premul_.at(static_cast<int>(op)));
}

void Communicator::mark_failed(dtrain_status_t status, const std::string& msg) noexcept {
  if (!failed_) {
    failed_ = true;
    failure_ = msg;
  }
  if (engine_) engine_->abort(status, msg);
}

void Communicator::abort(const std::string& reason) noexcept {
  if (abort_claimed_.exchange(true)) return;
  try {
    abort_reason_ = reason;
  } catch (...) {  // out of memory: the status alone says it
  }
  aborted_.store(true, std::memory_order_release);
  if (engine_) engine_->abort(DTRAIN_ERR_ABORTED, abort_reason_);
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
  if (d.premul) {  // scaled into recv, then summed in place there
    premultiply(d, send, recv, count, op);
    send = recv;
  }
  run(&d, [&] { engine_->allreduce(d, send, recv); });
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::broadcast, count, dtype, DTRAIN_SUM, root);
  if (rank_ == root) need(send, count, "sendbuf (at the root)", d.kind);
  need(recv, count, "recvbuf", d.kind);
  run(&d, [&] { engine_->broadcast(d, send, recv); });
}

void Communicator::allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype) {
  OpDesc d = next(OpKind::allgather, sendcount, dtype, DTRAIN_SUM, 0);
  need(send, sendcount, "sendbuf", d.kind);
  need(recv, sendcount, "recvbuf", d.kind);
  run(&d, [&] { engine_->allgather(d, send, recv); });
}

void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                                  dtrain_op_t op) {
  OpDesc d = next(OpKind::reduce_scatter, recvcount, dtype, op, 0);
  need(send, recvcount, "sendbuf", d.kind);
  need(recv, recvcount, "recvbuf", d.kind);
  if (d.premul) {  // every block scaled into the scratch buffer, which the engine then reduces
    const std::size_t all = recvcount * static_cast<std::size_t>(size());
    scratch_.resize(all * dtype_size(dtype));
    premultiply(d, send, scratch_.data(), all, op);
    send = scratch_.data();
  }
  run(&d, [&] { engine_->reduce_scatter(d, send, recv); });
}

void Communicator::barrier() {
  OpDesc d = next(OpKind::barrier, 0, DTRAIN_UINT8, DTRAIN_SUM, 0);
  run(&d, [&] { engine_->barrier(d); });
}

}  // namespace dtrain::coll
