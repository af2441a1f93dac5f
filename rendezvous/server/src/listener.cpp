#include "listener.hpp"

#include <netdb.h>

#include <memory>
#include <string>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "server_state.hpp"

namespace dtrain::rdzv::srv {

namespace {

std::string uv_text(int rc) { return uv_strerror(rc); }

void on_connection(uv_stream_t* s, int status) noexcept {
  auto& server = *static_cast<ServerState*>(s->data);
  if (status < 0) {
    DTRAIN_WARN(rdzv, "rendezvous: accept failed: {}", uv_text(status));
    return;
  }
  try {
    accept_conn(server, s);
  } catch (const std::exception& e) {
    DTRAIN_WARN(rdzv, "rendezvous: accept: {}", e.what());
  }
}

int bound_port(uv_tcp_t* tcp) {
  sockaddr_storage ss{};
  int len = sizeof ss;
  uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&ss), &len);
  return ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

int listen_on(ServerState& server, UvHandle<uv_tcp_t>& listener) {
  const auto& opts = server.opts;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(opts.port);
  int g = ::getaddrinfo(opts.host.c_str(), port.c_str(), &hints, &res);
  if (g != 0)
    throw IoError(fmt::format("rendezvous: cannot resolve listen address '{}': {}", opts.host, ::gai_strerror(g)));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  int rc = listener.init([&](uv_tcp_t* t) { return uv_tcp_init(server.loop, t); }, &server);
  if (rc < 0) throw IoError(fmt::format("rendezvous: tcp init: {}", uv_text(rc)));
  rc = uv_tcp_bind(listener.get(), res->ai_addr, 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener.get()), opts.backlog, on_connection);
  if (rc == UV_EADDRINUSE || rc == UV_EMFILE || rc == UV_ENFILE)
    throw ResourceError(fmt::format("rendezvous: cannot listen on {}:{}: {}{}", opts.host, opts.port, uv_text(rc),
                                    rc == UV_EADDRINUSE ? " (another process uses that port; pick another or 0 for a free one)"
                                                        : " (raise the open-files limit, ulimit -n)"));
  if (rc < 0)
    throw IoError(fmt::format("rendezvous: cannot listen on {}:{}: {}{}", opts.host, opts.port, uv_text(rc),
                              rc == UV_EADDRINUSE ? " (another process uses that port; pick another or 0 for a free one)"
                              : rc == UV_EADDRNOTAVAIL ? " (no local interface has that address)"
                                                       : ""));
  return bound_port(listener.get());
}

}  // namespace dtrain::rdzv::srv
