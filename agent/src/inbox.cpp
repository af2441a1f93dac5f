// The agent's inbox (inbox.hpp).
#include "inbox.hpp"

#include "dtrain/common/errors.hpp"

namespace dtrain::agent {

void Inbox::open(EventLoop& loop, Deliver deliver) {
  loop_ = &loop;
  deliver_ = std::move(deliver);
  std::lock_guard lk(mu_);
  int rc = async_.init([&](uv_async_t* a) {
    return uv_async_init(loop.get(), a, [](uv_async_t* h) noexcept {
      if (auto* self = static_cast<Inbox*>(h->data)) self->deliver();
    });
  }, this);
  if (rc < 0) throw IoError(fmt::format("uv_async_init: {}", uv_strerror(rc)));
  if (!events_.empty()) uv_async_send(async_.get());
}

void Inbox::post(Event e) {
  std::lock_guard lk(mu_);
  if (closed_) return;
  events_.push_back(std::move(e));
  if (async_) uv_async_send(async_.get());
}

void Inbox::close() {
  std::lock_guard lk(mu_);
  closed_ = true;
  async_.close();
}

void Inbox::deliver() noexcept {
  std::vector<Event> events;
  {
    std::lock_guard lk(mu_);
    events.swap(events_);
  }
  for (const auto& e : events) loop_->guarded([&] { deliver_(e); });
}

}  // namespace dtrain::agent
