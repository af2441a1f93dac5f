// The guardian process (guardian.hpp).
#include "guardian.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "spawn.hpp"

extern char** environ;

namespace dtrain::agent {

namespace {

void life_alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) noexcept {
  auto* self = static_cast<Guardian*>(h->data);
  *buf = self == nullptr ? uv_buf_init(nullptr, 0) : uv_buf_init(self->life_buffer(), 64);
}

void life_read(uv_stream_t* s, ssize_t nread, const uv_buf_t*) noexcept {
  if (auto* self = static_cast<Guardian*>(s->data)) self->on_life(nread);
}

// An open pipe handle on `fd` (which it then owns); closes fd on failure. Throws IoError.
void open_pipe(uv_loop_t* loop, UvHandle<uv_pipe_t>& p, int fd, Guardian* self) {
  int rc = p.init([&](uv_pipe_t* h) { return uv_pipe_init(loop, h, 0); }, self);
  if (rc == 0) rc = uv_pipe_open(p.get(), fd);
  else ::close(fd);
  if (rc < 0) throw IoError(fmt::format("the guardian's pipes: {}", uv_strerror(rc)));
}

}  // namespace

void Guardian::start(uv_loop_t* loop, const std::string& exe, const std::string& word, int stderr_fd,
                     const std::string& agent_id, Failed on_failed) {
  exe_ = exe + " " + word;
  on_failed_ = std::move(on_failed);
  int in[2], life[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw_os_error(errno, "cannot create the guardian's pipes");
  if (::pipe2(life, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(in[0]);
    ::close(in[1]);
    throw_os_error(err, "cannot create the guardian's pipes");
  }
  try {
    spawn(exe, word, stderr_fd, in[0], life[1]);
  } catch (...) {
    for (int fd : {in[1], life[0]}) ::close(fd);
    throw;
  }
  open_pipe(loop, in_, in[1], this);
  open_pipe(loop, life_, life[0], this);
  uv_read_start(reinterpret_cast<uv_stream_t*>(life_.get()), life_alloc, life_read);
  if (!agent_id.empty()) send("=" + agent_id + "\n");
}

// Closes its ends of the pipes the guardian got (in_fd, life_fd), whatever happens.
void Guardian::spawn(const std::string& exe, const std::string& word, int stderr_fd, int in_fd, int life_fd) {
  std::string file = exe, arg = word;
  char* args[] = {file.data(), arg.data(), nullptr};
  SpawnRequest req;
  req.file = file.c_str();
  req.argv = args;
  req.envp = environ;
  req.stdio[0] = in_fd;
  req.stdio[1] = life_fd;
  req.stdio[2] = stderr_fd;
  req.status_fd = life_fd;
  intermediate_ = spawn_detached(req);
  int err = errno;
  ::close(in_fd);
  ::close(life_fd);
  if (intermediate_ < 0) {
    intermediate_ = 0;
    throw_os_error(err, fmt::format("cannot start the guardian process '{}'", exe_));
  }
}

void Guardian::settle() {
  if (intermediate_ <= 0) return;
  while (::waitpid(intermediate_, nullptr, 0) < 0 && errno == EINTR) {
  }
  intermediate_ = 0;
}

void Guardian::on_life(ssize_t nread) {
  if (nread == 0) return;
  if (nread > 0) {
    said_.append(life_buf_, static_cast<std::size_t>(nread));
    if (said_.size() < sizeof(SpawnFailure)) return;
    SpawnFailure f;
    std::memcpy(&f, said_.data(), sizeof f);
    said_.clear();
    if (on_failed_)
      on_failed_(fmt::format("cannot start the guardian process '{}': {}", exe_, errno_text(f.err)));
    return;
  }
  life_.close();  // it exited
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
