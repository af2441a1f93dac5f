// The agent's loop, timers and signal watchers (event_loop.hpp).
#include "event_loop.hpp"

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

EventLoop::~EventLoop() { (void)close(); }

void EventLoop::open(Failed failed) {
  int rc = uv_loop_init(&loop_);
  if (rc < 0) throw_os_error(rc, "cannot create the agent's event loop");
  open_ = true;
  failed_ = std::move(failed);
}

void EventLoop::run() { uv_run(&loop_, UV_RUN_DEFAULT); }

bool EventLoop::close() {
  if (!open_) return true;
  uv_run(&loop_, UV_RUN_DEFAULT);  // the close callbacks of the handles closed last
  int rc = uv_loop_close(&loop_);
  if (rc != 0) {
    DTRAIN_WARN(agent, "libuv loop closed with handles left: {}", uv_strerror(rc));
    return false;
  }
  open_ = false;
  return true;
}

void EventLoop::fail(const std::exception& e) noexcept {
  if (failed_) failed_(e);
  else DTRAIN_ERROR(agent, "{}", e.what());
}

void EventLoop::fail_unknown() noexcept { fail(InternalError("unknown exception in an agent callback")); }

void Timer::open(EventLoop& loop, std::function<void()> fire) {
  loop_ = &loop;
  fire_ = std::move(fire);
  int rc = h_.init([&](uv_timer_t* h) { return uv_timer_init(loop.get(), h); }, this);
  if (rc < 0) throw IoError(fmt::format("uv_timer_init: {}", uv_strerror(rc)));
}

namespace {

void timer_fired(uv_timer_t* t) noexcept {
  auto* self = static_cast<Timer*>(t->data);
  if (self != nullptr) self->fired();
}

}  // namespace

void Timer::fired() noexcept { loop_->guarded(fire_); }

void Timer::start(double seconds) {
  if (h_) uv_timer_start(h_.get(), timer_fired, to_ms(seconds), 0);
}

void Timer::every(double seconds) {
  if (h_) uv_timer_start(h_.get(), timer_fired, to_ms(seconds), to_ms(seconds));
}

void Timer::stop() {
  if (h_) uv_timer_stop(h_.get());
}

bool Timer::active() const { return h_ && uv_is_active(h_.handle()) != 0; }

void SignalWatch::open(EventLoop& loop, const std::vector<int>& signals, std::function<void(int)> on_signal) {
  loop_ = &loop;
  on_signal_ = std::move(on_signal);
  for (int sig : signals) {
    UvHandle<uv_signal_t> h;
    int rc = h.init([&](uv_signal_t* s) { return uv_signal_init(loop.get(), s); }, this);
    if (rc == 0)
      rc = uv_signal_start(h.get(), [](uv_signal_t* s, int signum) noexcept {
        auto* self = static_cast<SignalWatch*>(s->data);
        if (self != nullptr) self->loop_->guarded([&] { self->on_signal_(signum); });
      }, sig);
    if (rc < 0) throw IoError(fmt::format("cannot watch signal {}: {}", sig, uv_strerror(rc)));
    h_.push_back(std::move(h));
  }
}

void SignalWatch::close() {
  for (auto& h : h_) h.close();
  h_.clear();
}

}  // namespace dtrain::agent
