#include "comm.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "dtrain/common/log.hpp"
#include "dtrain/common/params.hpp"
#include "progress.hpp"

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
  cfg.shm_single_copy_bytes = static_cast<std::size_t>(positive("DTRAIN_SHM_SINGLE_COPY_BYTES", 0));
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
  members_ = g.members;
  rank_ = g.rank;
  host_ = g.host;
  key_prefix_ = g.key_prefix;
  sent_.assign(members_.size(), 0);
  received_.assign(members_.size(), 0);
  TransportOptions o;
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
  o.shm_single_copy_bytes = cfg_.shm_single_copy_bytes;
  o.tcp_chunk_bytes = cfg_.tcp_chunk_bytes;
  o.spin_us = cfg_.spin_us;
  transport_ = make_transport(o);
  DTRAIN_INFO(coll, "rank {}/{} (world rank {}, local {}/{}, keys {}): {} engine", rank_, size(), cfg_.rank,
              cfg_.local_rank, cfg_.local_size, key_prefix_, engine_name());
}

Communicator::~Communicator() = default;

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
  if (kind == OpKind::broadcast && (root < 0 || root >= size()))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("broadcast: root {} is not a rank of this communicator (size {})", root, size()));
  OpDesc d;
  d.seq = ++seq_;
  d.kind = kind;
  d.dtype = dtype;
  d.op = (kind == OpKind::allreduce || kind == OpKind::reduce_scatter) ? op : DTRAIN_SUM;
  d.root = kind == OpKind::broadcast ? root : 0;
  d.count = count;
  d.start = coarse_now();
  d.deadline = d.start + cfg_.timeout;
  return d;
}

void Communicator::mark_failed(dtrain_status_t status, const std::string& msg) noexcept {
  if (!failed_) {
    failed_ = true;
    failure_ = msg;
  }
  if (transport_) transport_->abort(status, msg);
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
  run(&d, [&] { transport_->allreduce(d, send, recv); });
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::broadcast, count, dtype, DTRAIN_SUM, root);
  if (rank_ == root) need(send, count, "sendbuf (at the root)", d.kind);
  need(recv, count, "recvbuf", d.kind);
  run(&d, [&] { transport_->broadcast(d, send, recv); });
}

void Communicator::allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype) {
  OpDesc d = next(OpKind::allgather, sendcount, dtype, DTRAIN_SUM, 0);
  need(send, sendcount, "sendbuf", d.kind);
  need(recv, sendcount, "recvbuf", d.kind);
  run(&d, [&] { transport_->allgather(d, send, recv); });
}

void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                                  dtrain_op_t op) {
  OpDesc d = next(OpKind::reduce_scatter, recvcount, dtype, op, 0);
  need(send, recvcount, "sendbuf", d.kind);
  need(recv, recvcount, "recvbuf", d.kind);
  run(&d, [&] { transport_->reduce_scatter(d, send, recv); });
}

void Communicator::barrier() {
  OpDesc d = next(OpKind::barrier, 0, DTRAIN_UINT8, DTRAIN_SUM, 0);
  run(&d, [&] { transport_->barrier(d); });
}

}  // namespace dtrain::coll
