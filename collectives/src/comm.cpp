#include "comm.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "dtrain/common/log.hpp"
#include "dtrain/common/params.hpp"
#include "hosts.hpp"
#include "progress.hpp"
#include "reduce.hpp"
#include "split.hpp"

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

std::chrono::milliseconds deadline_of(double seconds) {
  const double ms = seconds * 1000.0;
  if (!(ms < static_cast<double>(kLongestDeadline.count()))) return kLongestDeadline;
  return std::chrono::milliseconds(std::max(1LL, static_cast<long long>(ms)));
}

void apply_params(CommConfig& cfg, double timeout_s_override) {
  double t = timeout_s_override > 0 ? timeout_s_override : param_double("DTRAIN_COLL_TIMEOUT_S");
  if (!(t > 0)) throw ConfigError(fmt::format("DTRAIN_COLL_TIMEOUT_S={}: the deadline must be > 0 seconds", t));
  cfg.timeout = deadline_of(t);
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

namespace {

// The world's members: ranks 0..size-1, this rank's host named by its first local rank.
Members world_members(const CommConfig& cfg, rdzv::Store* store) {
  DTRAIN_CHECK(store != nullptr, "no store");
  // Keys of this communicator: the n-th communicator a rank creates in this run and generation.
  const std::int64_t instance = store->add(fmt::format("coll/instance/{}", cfg.rank), 1);
  Members g;
  for (int r = 0; r < cfg.size; ++r) g.world.push_back(r);
  g.rank = cfg.rank;
  g.host = cfg.rank - cfg.local_rank;
  g.key_prefix = fmt::format("coll/{}/", instance);
  return g;
}

CommConfig checked_world(CommConfig cfg) {
  if (cfg.size < 1 || cfg.rank < 0 || cfg.rank >= cfg.size)
    throw CollError(DTRAIN_ERR_CONFIG, fmt::format("rank {} is outside world size {}", cfg.rank, cfg.size));
  if (cfg.local_rank < 0 || cfg.local_size < 0) {
    cfg.local_rank = cfg.rank;
    cfg.local_size = cfg.size;
  }
  if (cfg.local_size < 1 || cfg.local_rank >= cfg.local_size || cfg.local_size > cfg.size ||
      cfg.rank - cfg.local_rank < 0 || cfg.rank - cfg.local_rank + cfg.local_size > cfg.size)
    throw CollError(DTRAIN_ERR_CONFIG,
                    fmt::format("local rank {} of {} does not fit rank {} of {} (ranks of a node must be "
                                "contiguous: LOCAL_RANK/LOCAL_WORLD_SIZE vs RANK/WORLD_SIZE)",
                                cfg.local_rank, cfg.local_size, cfg.rank, cfg.size));
  return cfg;
}

}  // namespace

Communicator::Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store)
    : cfg_(checked_world(cfg)),
      store_(std::move(store)),
      members_(world_members(cfg_, store_.get())),
      mailbox_(members_.world, members_.rank),
      any_(members_.world, members_.rank) {
  start();
}

Communicator::Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store, Members members)
    : cfg_(cfg),
      store_(std::move(store)),
      members_(std::move(members)),
      mailbox_(members_.world, members_.rank),
      any_(members_.world, members_.rank) {
  start();
}

std::unique_ptr<Communicator> Communicator::with_hosts(CommConfig cfg, std::shared_ptr<rdzv::Store> store,
                                                       const std::string& host) {
  if (cfg.size < 1 || cfg.rank < 0 || cfg.rank >= cfg.size)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("rank {} is outside size {}", cfg.rank, cfg.size));
  DTRAIN_CHECK(store != nullptr, "no store");
  Hosts h = discover_hosts(*store, cfg.rank, cfg.size, host, cfg.timeout);
  cfg.local_rank = h.local_rank;
  cfg.local_size = h.local_size;
  if (cfg.advertise.empty()) cfg.advertise = default_advertise(h.local_size == cfg.size);
  return std::unique_ptr<Communicator>(new Communicator(cfg, std::move(store), std::move(h.members)));
}

void Communicator::start() {
  init_timeout_ = cfg_.timeout;
  EngineOptions o;
  o.members = members_.world;
  o.rank = members_.rank;
  if (members_.host_of.empty()) {  // the world: this host's ranks are contiguous
    for (int j = 0; j < cfg_.local_size; ++j) o.node.push_back(cfg_.rank - cfg_.local_rank + j);
  } else {
    for (std::size_t r = 0; r < members_.host_of.size(); ++r)
      if (members_.host_of[r] == members_.host) o.node.push_back(static_cast<int>(r));
  }
  o.host_of = members_.host_of;
  o.kind = cfg_.transport;
  o.store = store_.get();
  o.key_prefix = members_.key_prefix;
  o.shm_name_prefix = fmt::format("dtrain-{}-g{}", sanitize(cfg_.run_id), cfg_.generation);
  o.advertise = cfg_.advertise;
  o.timeout = cfg_.timeout;
  o.shm_slot_bytes = cfg_.shm_slot_bytes;
  o.shm_p2p_bytes = cfg_.shm_p2p_bytes;
  o.tcp_chunk_bytes = cfg_.tcp_chunk_bytes;
  o.spin_us = cfg_.spin_us;
  engine_ = make_engine(o);
  DTRAIN_INFO(coll, "rank {}/{} (world rank {}, local {}/{}, keys {}): {} engine", rank(), size(), cfg_.rank,
              cfg_.local_rank, cfg_.local_size, key_prefix(), engine_name());
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
  d.premul = reducing && premul_.contains(op);
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
  if (premul_.contains(op)) {
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
  return premul_.create(scale);
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
    premul_.apply(op, dtype, send, recv, count);
    send = recv;
  }
  run(&d, [&] { engine_->allreduce(d, send, recv); });
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::broadcast, count, dtype, DTRAIN_SUM, root);
  if (rank() == root) need(send, count, "sendbuf (at the root)", d.kind);
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
    premul_.apply(op, dtype, send, scratch_.data(), all);
    send = scratch_.data();
  }
  run(&d, [&] { engine_->reduce_scatter(d, send, recv); });
}

void Communicator::barrier() {
  OpDesc d = next(OpKind::barrier, 0, DTRAIN_UINT8, DTRAIN_SUM, 0);
  run(&d, [&] { engine_->barrier(d); });
}

void Communicator::reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                          int root) {
  OpDesc d = next(OpKind::reduce, count, dtype, op, root);
  need(send, count, "sendbuf", d.kind);
  if (rank() == root) need(recv, count, "recvbuf (at the root)", d.kind);
  void* out = recv;
  if (rank() != root) {  // the result is dropped here
    scratch_.resize(count * dtype_size(dtype));
    out = scratch_.data();
  }
  if (d.premul) {
    premul_.apply(op, dtype, send, out, count);
    send = out;
  }
  // The engine's allreduce with the reduce's fingerprint.
  run(&d, [&] { engine_->allreduce(d, send, out); });
}

void Communicator::gather(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::gather, count, dtype, DTRAIN_SUM, root);
  need(send, count, "sendbuf", d.kind);
  if (rank() == root) need(recv, count, "recvbuf (at the root)", d.kind);
  run(&d, [&] { exchange::gather(context(), d, send, recv); });
}

void Communicator::scatter(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root) {
  OpDesc d = next(OpKind::scatter, count, dtype, DTRAIN_SUM, root);
  if (rank() == root) need(send, count, "sendbuf (at the root)", d.kind);
  need(recv, count, "recvbuf", d.kind);
  run(&d, [&] { exchange::scatter(context(), d, send, recv); });
}

void Communicator::alltoall(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype) {
  OpDesc d = next(OpKind::alltoall, count, dtype, DTRAIN_SUM, 0);
  const std::size_t all = count * static_cast<std::size_t>(size());
  need(send, all, "sendbuf", d.kind);
  need(recv, all, "recvbuf", d.kind);
  std::vector<std::size_t> counts(static_cast<std::size_t>(size()), count), displs(counts.size());
  for (std::size_t r = 0; r < displs.size(); ++r) displs[r] = r * count;
  run(&d, [&] {
    exchange::alltoallv(context(), d, send, counts.data(), displs.data(), recv, counts.data(), displs.data());
  });
}

void Communicator::alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                             const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype) {
  const char* arrays[] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
  const std::size_t* given[] = {sendcounts, sdispls, recvcounts, rdispls};
  for (int i = 0; i < 4; ++i)
    if (given[i] == nullptr)
      throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("alltoallv: {} is NULL (one entry per rank)", arrays[i]));
  std::size_t sent = 0, received = 0;
  for (int r = 0; r < size(); ++r) {
    sent += sendcounts[r];
    received += recvcounts[r];
  }
  // The fingerprint's count is 0 (ranks send different totals); the pairs' messages carry the counts.
  OpDesc d = next(OpKind::alltoallv, 0, dtype, DTRAIN_SUM, 0);
  need(send, sent, "sendbuf", d.kind);
  need(recv, received, "recvbuf", d.kind);
  run(&d, [&] { exchange::alltoallv(context(), d, send, sendcounts, sdispls, recv, recvcounts, rdispls); });
}

Communicator::Split Communicator::split(int color, int key, bool flag) {
  OpDesc d = next(OpKind::comm_split, split_fields, DTRAIN_INT64, DTRAIN_SUM, 0);
  const std::uint64_t n = ++splits_;
  SplitPlan plan;
  run(&d, [&] { plan = plan_split(*engine_, d, members_, n, color, key, flag); });
  Split out;
  out.all_flag = plan.all_flag;
  if (plan.members) out.comm.reset(new Communicator(cfg_, store_, std::move(*plan.members)));
  return out;
}

void Communicator::check_p2p(const P2pArgs& a, const char* what) const {
  if (a.peer < 0 || a.peer >= size())
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("{}: peer {} is not a rank of this communicator (0..{})", what, a.peer, size() - 1));
  if (!valid_dtype(a.dtype))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: invalid dtype {}", what, static_cast<int>(a.dtype)));
  if (a.tag < 0)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: tag {} is negative (tags are 0..INT_MAX)", what, a.tag));
  const void* buf = a.src != nullptr ? a.src : a.dst;
  if (buf == nullptr && a.count != 0 && !a.device)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: the buffer is NULL with a count of {}", what, a.count));
}

// Each call is checked here (DTRAIN_ERR_INVALID_ARGUMENT, nothing sent, the communicator stays
// usable), numbered per ordered pair and carried; a failure while carrying it fails the communicator
// like a failed collective.
void Communicator::sendrecv(const P2pArgs* send, const P2pArgs* recv) {
  check_usable();
  if (send != nullptr) check_p2p(*send, "send");
  if (recv != nullptr) check_p2p(*recv, "recv");
  const Mailbox::Post post = mailbox_.post(send, recv, coarse_now() + cfg_.timeout, cfg_.timeout);
  run(nullptr, [&] { mailbox_.deliver(*engine_, post); });
}

int Communicator::recv_any(void* buf, std::size_t count, dtrain_dtype_t dtype, int tag) {
  check_usable();
  P2pArgs a;
  a.dst = buf;
  a.count = count;
  a.dtype = dtype;
  a.peer = rank();
  a.tag = tag;
  check_p2p(a, "recv_any");
  run(nullptr, [&] { a.peer = any_.find(*engine_, mailbox_, tag, count, dtype, cfg_.timeout); });
  sendrecv(nullptr, &a);
  return a.peer;
}

}  // namespace dtrain::coll
