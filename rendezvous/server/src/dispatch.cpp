#include "dispatch.hpp"

#include <array>

#include "dtrain/common/log.hpp"
#include "dtrain/common/text.hpp"
#include "handlers.hpp"
#include "server_state.hpp"
#include "dtrain/rendezvous/store/refused.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

using wire::Frame;
using wire::Op;

namespace {

using Handler = void (*)(Conn&, const Frame&);

constexpr std::array<Handler, 256> make_table() {
  std::array<Handler, 256> t{};
  t[std::size_t(Op::set)] = on_set;
  t[std::size_t(Op::get)] = on_get;
  t[std::size_t(Op::add)] = on_add;
  t[std::size_t(Op::compare_set)] = on_compare_set;
  t[std::size_t(Op::check)] = on_check;
  t[std::size_t(Op::erase)] = on_erase;
  t[std::size_t(Op::barrier)] = on_barrier;
  t[std::size_t(Op::join)] = on_join;
  t[std::size_t(Op::heartbeat)] = on_heartbeat;
  t[std::size_t(Op::report)] = on_report;
  t[std::size_t(Op::watch)] = on_watch;
  t[std::size_t(Op::leave)] = on_leave;
  t[std::size_t(Op::status)] = on_status;
  t[std::size_t(Op::list_runs)] = on_list_runs;
  t[std::size_t(Op::table)] = on_table;
  return t;
}

constexpr std::array<Handler, 256> kHandlers = make_table();

// Logs and answers ERROR auth, then closes once the reason is flushed.
void refuse(Conn& c, std::string_view reason) {
  std::string line = fmt::format("{}{} (run '{}'): {}", c.peer, c.hs.name().empty() ? "" : " ('" + c.hs.name() + "')",
                                 text::printable(c.hs.run_id(), 128), reason);
  if (c.server->drops.admit(DropLog::Clock::now(), line)) DTRAIN_WARN(rdzv, "rendezvous: refused {}", line);
  send_error(c, wire::ErrorCode::auth, reason);
  close_conn(c, Close::after_flush);
}

void handshake_step(Conn& c, const Frame& f) {
  auto step = c.hs.step(f, c.server->opts);
  switch (step.kind) {
    case Handshake::Step::Kind::reply: return send(c, step.reply);
    case Handshake::Step::Kind::refuse: return refuse(c, step.reason);
    case Handshake::Step::Kind::ready: break;
  }
  authenticated(c);
  attach(c);
  send(c, c.hs.welcome(ip_of(c.peer), c.server->opts));
  DTRAIN_DEBUG(rdzv, "rendezvous: {} ('{}') joined run '{}' generation {}", c.peer, c.hs.name(), c.hs.run_id(),
               c.hs.generation());
}

}  // namespace

void handle_frame(Conn& c, const Frame& f) {
  if (!c.hs.ready()) return handshake_step(c, f);
  Handler h = kHandlers[std::size_t(f.op)];
  if (h == nullptr)
    throw wire::ProtocolError(fmt::format("sent a {} frame, which is not a request", wire::op_name(f.op)));
  try {
    h(c, f);
  } catch (const Refused& e) {
    send_error(c, e.code, e.what());
  }
}

}  // namespace dtrain::rdzv::srv
