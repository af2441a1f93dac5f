#include "dtrain/common/net.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "dtrain/common/errors.hpp"

namespace dtrain::net {

std::string endpoint_text(std::string_view host, int port) {
  return host.find(':') != std::string_view::npos ? fmt::format("[{}]:{}", host, port)
                                                   : fmt::format("{}:{}", host, port);
}

std::string endpoint_text(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    return endpoint_text(buf, ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    return endpoint_text(buf, ntohs(a->sin6_port));
  }
  return "?";
}

HostPort parse_host_port(std::string_view s, std::string_view what) {
  std::string_view host, port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      throw ConfigError(fmt::format("{}: '{}' is not HOST:PORT (IPv6 as [addr]:port)", what, s));
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos || s.find(':') != colon)
      throw ConfigError(fmt::format("{}: '{}' is not HOST:PORT, e.g. 10.0.0.1:29400", what, s));
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (host.empty()) throw ConfigError(fmt::format("{}: '{}' has an empty host, e.g. 10.0.0.1:29400", what, s));
  int p = -1;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc{} || ptr != port.data() + port.size())
    throw ConfigError(fmt::format("{}: port '{}' in '{}' is not a number", what, port, s));
  if (p < 1 || p > 65535)
    throw ConfigError(fmt::format("{}: port {} in '{}' is out of range 1-65535", what, p, s));
  return {std::string(host), p};
}

int pick_free_port(const std::string& addr) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    len = sizeof *v6;
  } else {
    v4->sin_family = AF_INET;
    if (::inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) != 1) v4->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof *v4;
  }
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(fmt::format("cannot pick a free port: socket: {}", errno_text(errno)));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    int e = errno;
    ::close(fd);
    throw IoError(fmt::format("cannot pick a free port on {}: {}", addr, errno_text(e)));
  }
  ::close(fd);
  return ss.ss_family == AF_INET6 ? ntohs(v6->sin6_port) : ntohs(v4->sin_port);
}

int bind_probe(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string ps = std::to_string(port);
  if (::getaddrinfo(host.c_str(), ps.c_str(), &hints, &res) != 0 || res == nullptr) return EADDRNOTAVAIL;
  int err = 0;
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
  } else {
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0) err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return err;
}

bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  bool all = res != nullptr;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      auto a = ntohl(reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr.s_addr);
      if ((a >> 24) != 127) all = false;
    } else if (ai->ai_family == AF_INET6) {
      auto* a6 = &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr;
      if (!IN6_IS_ADDR_LOOPBACK(a6)) all = false;
    } else {
      all = false;
    }
  }
  ::freeaddrinfo(res);
  return all;
}

}  // namespace dtrain::net
