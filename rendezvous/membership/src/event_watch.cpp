// EventWatch (event_watch.hpp): the built-in session's watcher thread.
#include "dtrain/rendezvous/membership/event_watch.hpp"

#include <exception>

#include "dtrain/common/errors.hpp"

namespace dtrain::rdzv {
namespace {
// A WATCH waits this long at the server, then is asked again (a silent rendezvous is found by the
// heartbeats, not here).
constexpr std::chrono::milliseconds kWatchSlice{30000};
constexpr std::chrono::milliseconds kGrace{15000};
}  // namespace

void EventWatch::start(const ClientOptions& co) {
  stop();
  conn_ = connect_store(co);
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void EventWatch::stop() {
  stopping_ = true;
  if (conn_) conn_->close();
  if (thread_.joinable()) thread_.join();
  conn_.reset();
}

void EventWatch::loop() {
  using wire::Frame;
  using wire::Op;
  while (!stopping_) {
    try {
      Frame r = conn_->call(Frame(Op::watch).i64(events_.last_seq()).i64(kWatchSlice.count()), kWatchSlice + kGrace);
      events_.deliver(unpack_event(r.bytes_at(0)));
    } catch (const TimeoutError&) {
      continue;
    } catch (const std::exception& e) {
      if (stopping_) return;
      events_.deliver(rendezvous_lost(conn_->endpoint(), fmt::format("lost the connection to the rendezvous: {}", e.what())));
      return;
    }
  }
}

}  // namespace dtrain::rdzv
