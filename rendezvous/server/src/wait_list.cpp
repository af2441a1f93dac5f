#include "wait_list.hpp"

#include "handlers.hpp"
#include "server_state.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

namespace {

void remove_from_scope(Conn& c, Scope& s) {
  switch (c.park) {
    case Park::get: {
      auto it = s.getters.find(c.park_key);
      if (it != s.getters.end()) {
        remove_waiter(it->second, &c);
        if (it->second.empty()) s.getters.erase(it);
      }
      break;
    }
    case Park::barrier: s.barriers.leave(c.park_key, &c); break;
    case Park::join: remove_waiter(s.joiners, &c); break;
    case Park::watch: remove_waiter(s.watchers, &c); break;
    case Park::leave: remove_waiter(s.leavers, &c); break;
    case Park::none: break;
  }
}

void on_timeout(Conn& c) {
  if (c.closing || c.park == Park::none) return;
  switch (c.park) {
    case Park::get: return get_timed_out(c);
    case Park::barrier: return barrier_timed_out(c);
    case Park::join: return join_timed_out(c);
    case Park::watch: return watch_timed_out(c);
    case Park::leave: return leave_timed_out(c);
    case Park::none: return;
  }
}

}  // namespace

void park(Conn& c, Park what, std::string key, std::int64_t timeout_ms) {
  c.park = what;
  c.park_key = std::move(key);
  c.park_timeout_ms = timeout_ms;
  uv_timer_start(c.wait.get(), [](uv_timer_t* t) noexcept {
    auto& conn = *static_cast<Conn*>(t->data);
    try {
      on_timeout(conn);
      drain_pumps(*conn.server);
    } catch (const std::exception& e) {
      drop(conn, fmt::format("internal error at timeout: {}", e.what()));
    }
  }, std::uint64_t(std::max<std::int64_t>(timeout_ms, 0)), 0);
}

void unpark(Conn& c, bool resume) {
  if (c.park == Park::none) return;
  if (c.scope != nullptr) remove_from_scope(c, *c.scope);
  c.park = Park::none;
  if (c.wait) uv_timer_stop(c.wait.get());
  if (resume && !c.closing && c.dec.buffered() > 0) c.server->pump_queue.push_back(&c);
}

void release_all(Waiters waiters, const std::shared_ptr<const Bytes>& reply) {
  for (Conn* w : waiters) {
    unpark(*w);
    send_shared(*w, reply);
  }
}

}  // namespace dtrain::rdzv::srv
