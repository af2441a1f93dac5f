// The store operations on the wire: SET, GET, ADD, COMPARE_SET, CHECK, DELETE, BARRIER over the
// scope's key-value table (kv_table.hpp) and store barriers (store_barrier.hpp), with blocking GETs
// and barrier waits parked (wait_list.hpp).
#include "handlers.hpp"
#include "server_state.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

using wire::ErrorCode;
using wire::Frame;
using wire::Op;

namespace {

std::string key_arg(const Frame& f, std::size_t i) { return checked_key(f.str_at(i)); }

// Answers the GETs parked on key with its new value.
void wake_getters(Scope& s, const std::string& key) {
  auto it = s.getters.find(key);
  if (it == s.getters.end()) return;
  auto waiting = std::move(it->second);
  s.getters.erase(it);
  release_all(std::move(waiting), std::make_shared<const Bytes>(wire::encode(Frame(Op::value).bytes(*s.kv.find(key)))));
}

}  // namespace

void on_set(Conn& c, const Frame& f) {
  auto key = key_arg(f, 0);
  auto v = f.bytes_at(1);
  c.scope->kv.set(key, Bytes(v.begin(), v.end()));
  send(c, Frame(Op::ok));
  wake_getters(*c.scope, key);
}

void on_get(Conn& c, const Frame& f) {
  Scope& s = *c.scope;
  auto key = key_arg(f, 0);
  std::int64_t t = f.i64_at(1);
  if (const Bytes* v = s.kv.find(key)) return send(c, Frame(Op::value).bytes(*v));
  if (t <= 0) return send_error(c, ErrorCode::timeout, get_timeout_text(key, 0));
  s.getters[key].push_back(&c);
  park(c, Park::get, key, t);
}

void on_add(Conn& c, const Frame& f) {
  auto key = key_arg(f, 0);
  std::int64_t v = c.scope->kv.add(key, f.i64_at(1));
  send(c, Frame(Op::value).i64(v));
  wake_getters(*c.scope, key);
}

void on_compare_set(Conn& c, const Frame& f) {
  auto key = key_arg(f, 0);
  auto expected = f.bytes_at(1);
  auto desired = f.bytes_at(2);
  bool swapped = false;
  Bytes after = c.scope->kv.compare_set(key, expected, desired, swapped);
  send(c, Frame(Op::value).bytes(after));
  if (swapped) wake_getters(*c.scope, key);
}

void on_check(Conn& c, const Frame& f) {
  bool all = true;
  for (std::size_t i = 0; i < f.args.size(); ++i)
    if (!c.scope->kv.contains(key_arg(f, i))) all = false;
  send(c, Frame(Op::value).i64(all ? 1 : 0));
}

void on_erase(Conn& c, const Frame& f) {
  bool had = c.scope->kv.erase(key_arg(f, 0));
  send(c, Frame(Op::value).i64(had ? 1 : 0));
}

void on_barrier(Conn& c, const Frame& f) {
  auto name = key_arg(f, 0);
  std::int64_t count = f.i64_at(1);
  std::int64_t t = f.i64_at(2);
  if (auto all = c.scope->barriers.arrive(name, count, &c))
    return release_all(std::move(*all), std::make_shared<const Bytes>(wire::encode(Frame(Op::ok))));
  park(c, Park::barrier, name, t);
}

void get_timed_out(Conn& c) {
  auto key = c.park_key;
  unpark(c);
  send_error(c, ErrorCode::timeout, get_timeout_text(key, c.park_timeout_ms));
}

void barrier_timed_out(Conn& c) {
  auto text = c.scope->barriers.timeout_text(c.park_key, c.park_timeout_ms);
  unpark(c);
  send_error(c, ErrorCode::timeout, text);
}

}  // namespace dtrain::rdzv::srv
