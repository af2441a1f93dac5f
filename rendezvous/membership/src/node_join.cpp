// One join of the built-in rendezvous (node_join.hpp).
#include "node_join.hpp"

#include <exception>
#include <utility>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/net.hpp"

namespace dtrain::rdzv {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::Frame;
using wire::Op;

constexpr milliseconds kGrace{15000};
constexpr milliseconds kOpTimeout{60000};
constexpr int kMaxHops = 8;

Frame join_request(const NodeSessionOptions& o, const std::string& advertise, int master_port) {
  Frame req(Op::join);
  req.str(o.host)
      .i64(o.node_rank)
      .i64(o.slots)
      .i64(o.instances)
      .str(o.spec_hash)
      .i64(master_port)
      .str(advertise)
      .i64(o.heartbeat_timeout.count())
      .i64(o.join_timeout.count())
      .i64(o.min_instances)
      .i64(o.last_call.count());
  return req;
}

// The join request and the rank table on `conn`; the progress frames feed `progress`.
JoinResult run_join(const NodeSessionOptions& o, TcpStore& conn, const ProgressFn& progress) {
  std::string local = conn.local_address();
  std::string advertise = o.advertise_addr.empty() ? local : o.advertise_addr;
  int mport = o.master_port > 0 ? o.master_port : net::pick_free_port(advertise);
  auto start = Clock::now();
  auto on_progress = [&](const Frame& f) {
    if (!progress) return;
    JoinProgress p;
    p.joined = int(f.i64_at(0));
    p.instances = int(f.i64_at(1));
    p.missing = std::string(f.str_at(2));
    p.endpoint = conn.endpoint();
    p.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    p.timeout = o.join_timeout;
    progress(p);
  };
  JoinResult r;
  try {
    Frame reply = conn.call(join_request(o, advertise, mport), o.join_timeout + kGrace, on_progress);
    r.self = unpack_join_reply(reply.bytes_at(0));
    if (o.fetch_table) {
      Frame t = conn.call(Frame(Op::table), kOpTimeout);
      r.table.reserve(t.args.size());
      for (const auto& a : t.args) r.table.push_back(unpack_node_entry(a));
    }
  } catch (const wire::ProtocolError& e) {
    throw IoError(fmt::format("rendezvous {}: bad join reply: {}", conn.endpoint(), e.what()));
  }
  r.local_address = local;
  return r;
}

// One JOIN on a fresh connection, which cancel.cancel() closes while the join waits.
Joined join_once(const NodeSessionOptions& o, const ClientOptions& co, JoinCancel& cancel, const ProgressFn& progress) {
  const std::string where = net::endpoint_text(co.host, co.port);
  cancel.check(where);
  Joined j;
  j.session = connect_store(co);
  std::exception_ptr failed;
  {
    auto closing = cancel.closing([c = j.session.get()] { c->close(); });
    cancel.check(where);
    try {
      j.result = run_join(o, *j.session, progress);
      j.result.generation = co.generation;
    } catch (...) {
      failed = std::current_exception();
    }
  }
  cancel.check(where);  // a failure (or a success that raced the close) is cancel_join's doing: say so
  if (failed) std::rethrow_exception(failed);
  return j;
}

}  // namespace

Joined join_rendezvous(NodeSessionOptions& opts, JoinCancel& cancel, const ProgressFn& progress) {
  ClientOptions co = opts.store;
  if (co.client_name.empty()) co.client_name = fmt::format("agent {}", opts.host);
  // Other nodes may start long before node 0 serves the store: keep trying for the join timeout.
  co.connect_timeout = std::max(co.connect_timeout, opts.join_timeout);
  co.cancel = cancel.canceller();
  if (progress)
    co.on_retry = [&](milliseconds elapsed, const std::string& why) {
      JoinProgress p;
      p.reachable = false;
      p.endpoint = net::endpoint_text(co.host, co.port);
      p.why = why;
      p.instances = opts.instances;
      p.elapsed = elapsed;
      p.timeout = opts.join_timeout;
      progress(p);
    };
  for (int hop = 0;; ++hop) {
    try {
      return join_once(opts, co, cancel, progress);
    } catch (const Moved& m) {
      if (hop >= kMaxHops || m.generation <= co.generation) throw;
      DTRAIN_INFO(rdzv, "rendezvous {}: {}", net::endpoint_text(co.host, co.port), m.what());
      co.generation = int(m.generation);
      opts.store.generation = co.generation;
    }
  }
}

}  // namespace dtrain::rdzv
