// The store the agent serves itself (embedded_store.hpp).
#include "embedded_store.hpp"

#include <fmt/format.h>

#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/store/auth.hpp"

namespace dtrain::agent {

void EmbeddedStore::start(EventLoop& loop, const std::string& run_id) {
  loop_ = &loop;
  token_ = rdzv::auth::new_token();
  rdzv::ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.token = token_;
  so.run_id = run_id;
  server_ = std::make_unique<rdzv::Server>(so);
  server_->start(/*serve_now=*/false);
  int rc = watch_.init([&](uv_poll_t* p) { return uv_poll_init(loop.get(), p, server_->listen_fd()); }, this);
  if (rc == 0)
    rc = uv_poll_start(watch_.get(), UV_READABLE, [](uv_poll_t* p, int, int) noexcept {
      auto* self = static_cast<EmbeddedStore*>(p->data);
      if (self == nullptr) return;
      self->watch_.close();
      self->loop_->guarded([&] { self->server_->serve(); });
    });
  if (rc < 0) server_->serve();  // no watch: serve at once
  DTRAIN_DEBUG(agent, "standalone store on {}", addr());
}

std::string EmbeddedStore::addr() const { return server_ ? fmt::format("127.0.0.1:{}", server_->port()) : std::string(); }

void EmbeddedStore::stop() {
  if (server_) server_->stop();
}

}  // namespace dtrain::agent
