// The guardian process (guardian.hpp).
#include "guardian.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

void Guardian::start(uv_loop_t* loop, const std::string& exe, const std::string& word, int stderr_fd,
                     const std::string& agent_id) {
  int rc = in_.init([&](uv_pipe_t* p) { return uv_pipe_init(loop, p, 0); }, nullptr);
  if (rc < 0) throw IoError(fmt::format("uv_pipe_init: {}", uv_strerror(rc)));
  std::string file = exe, arg = word;
  char* args[] = {file.data(), arg.data(), nullptr};
  uv_stdio_container_t stdio[3];
  stdio[0].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE);
  stdio[0].data.stream = reinterpret_cast<uv_stream_t*>(in_.get());
  stdio[1].flags = UV_IGNORE;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = stderr_fd;
  uv_process_options_t po{};
  po.file = file.c_str();
  po.args = args;
  po.stdio = stdio;
  po.stdio_count = 3;
  po.flags = UV_PROCESS_DETACHED;
  po.exit_cb = [](uv_process_t* p, std::int64_t, int) noexcept {
    auto* self = static_cast<Guardian*>(p->data);
    if (self != nullptr) self->proc_.close();
  };
  rc = proc_.init([&](uv_process_t* p) { return uv_spawn(loop, p, &po); }, this, true);
  if (rc < 0) {
    in_.close();
    throw_os_error(rc, fmt::format("cannot start the guardian process '{} {}'", exe, word));
  }
  if (!agent_id.empty()) send("=" + agent_id + "\n");
}

void Guardian::send(std::string msg) {
  if (!in_) return;
  uv_buf_t b = uv_buf_init(msg.data(), static_cast<unsigned>(msg.size()));
  auto* s = reinterpret_cast<uv_stream_t*>(in_.get());
  int n = uv_try_write(s, &b, 1);
  if (n == static_cast<int>(msg.size())) return;
  if (n < 0 && n != UV_EAGAIN) {
    DTRAIN_WARN(agent, "guardian pipe: {}", uv_strerror(n));
    return;
  }
  // the rest through a write request that owns its bytes until the callback
  struct Req {
    uv_write_t req;
    std::string bytes;
  };
  auto* r = new Req{};
  r->bytes = msg.substr(n > 0 ? static_cast<std::size_t>(n) : 0);
  uv_buf_t rb = uv_buf_init(r->bytes.data(), static_cast<unsigned>(r->bytes.size()));
  int rc = uv_write(&r->req, s, &rb, 1, [](uv_write_t* req, int) noexcept { delete reinterpret_cast<Req*>(req); });
  if (rc < 0) delete r;
}

}  // namespace dtrain::agent
