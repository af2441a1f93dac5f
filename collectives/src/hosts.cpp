// Host discovery through a caller's store (hosts.hpp).
#include "hosts.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "call.hpp"
#include "dtrain/common/params.hpp"

namespace dtrain::coll {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// The text of a socket address, "" when not IPv4/IPv6.
std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    return ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf) ? buf : "";
  if (sa->sa_family == AF_INET6)
    return ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf) ? buf : "";
  return "";
}

bool is_loopback(const std::string& a) { return a.rfind("127.", 0) == 0 || a == "::1"; }

// The local address the kernel would send from towards `host` (a UDP connect() sends nothing).
std::string route_to(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const char* port = std::getenv("MASTER_PORT");
  if (::getaddrinfo(host.c_str(), port != nullptr && *port ? port : "9", &hints, &res) != 0) return "";
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0)
      out = address_text(reinterpret_cast<sockaddr*>(&local));
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

// The first non-loopback address this host's name resolves to, else the name itself.
std::string host_name_address() {
  const std::string name = host_name();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0) return name;
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    std::string t = address_text(a->ai_addr);
    if (!t.empty() && !is_loopback(t)) out = t;
  }
  ::freeaddrinfo(res);
  return out.empty() ? name : out;
}

}  // namespace

std::string default_host_identity() {
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  return boot.empty() ? host_name() : host_name() + "/" + boot;
}

std::string default_advertise(bool all_local) {
  std::string a = param_string("DTRAIN_SOCKET_ADDR");
  if (a.empty())
    if (const char* v = std::getenv("DTRAIN_LOCAL_ADDR"); v != nullptr) a = v;
  if (!a.empty()) return a;
  if (const char* m = std::getenv("MASTER_ADDR"); m != nullptr && *m != '\0') {
    a = route_to(m);
    // A master on loopback says nothing about the interface other hosts reach.
    if (!a.empty() && (all_local || !is_loopback(a))) return a;
  }
  if (all_local) return "127.0.0.1";
  return host_name_address();
}

Hosts discover_hosts(rdzv::Store& store, int rank, int n, const std::string& host, std::chrono::milliseconds timeout) {
  // Keys of this communicator: the n-th communicator a rank creates through this store.
  const std::int64_t instance = store.add(fmt::format("coll/instance/{}", rank), 1);
  Hosts out;
  Members& g = out.members;
  g.key_prefix = fmt::format("coll/{}/", instance);
  store.set(fmt::format("{}host/{}", g.key_prefix, rank), rdzv::as_bytes(host));
  std::vector<std::string> ids(static_cast<std::size_t>(n));
  const auto deadline = Clock::now() + timeout;
  for (int r = 0; r < n; ++r) {
    if (r == rank) {
      ids[static_cast<std::size_t>(r)] = host;
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      ids[static_cast<std::size_t>(r)] = rdzv::to_string(
          store.get(fmt::format("{}host/{}", g.key_prefix, r), std::max(left, std::chrono::milliseconds(1))));
    } catch (const TimeoutError& e) {
      throw CollError(DTRAIN_ERR_TIMEOUT,
                      fmt::format("init: rank {} did not publish its host within {} (is it running, with size {} "
                                  "and this store?): {}",
                                  r, seconds_text(timeout), n, e.what()));
    }
  }
  for (int r = 0; r < n; ++r) {
    int first = r;  // the host's lowest rank names it
    for (int q = 0; q < r; ++q)
      if (ids[static_cast<std::size_t>(q)] == ids[static_cast<std::size_t>(r)]) {
        first = q;
        break;
      }
    g.world.push_back(r);
    g.host_of.push_back(first);
  }
  g.rank = rank;
  g.host = g.host_of[static_cast<std::size_t>(rank)];
  for (int r = 0; r < n; ++r)
    if (g.host_of[static_cast<std::size_t>(r)] == g.host) {
      if (r < rank) ++out.local_rank;
      ++out.local_size;
    }
  return out;
}

}  // namespace dtrain::coll
