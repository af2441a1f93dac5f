#pragma once
// Address helpers shared by the rendezvous, the agent, the CLI and the collectives library:
// host:port text in both directions, free ports, bind probes and the loopback test.
#include <string>
#include <string_view>

struct sockaddr_storage;

namespace dtrain::net {

struct HostPort {
  std::string host;
  int port;
};

// "host:port", or "[v6]:port" when the host is an IPv6 literal.
std::string endpoint_text(std::string_view host, int port);
// The address of a connected or accepted socket as endpoint_text, "?" for other families.
std::string endpoint_text(const sockaddr_storage& ss);

// "host:port" or "[v6]:port"; throws ConfigError naming `what` when malformed or the port is out of range.
HostPort parse_host_port(std::string_view s, std::string_view what);

// A port that is free on `addr` right now (bind to port 0, read it back, close). Throws IoError
// when `addr` cannot be bound (not an address of this machine).
int pick_free_port(const std::string& addr);

// 0 when host:port can be bound here right now (so this machine may serve it), else the errno
// (EADDRNOTAVAIL: not an address of this host; EADDRINUSE: already served here).
int bind_probe(const std::string& host, int port);

// True when every address `host` resolves to is a loopback address (127/8, ::1).
bool is_loopback_host(const std::string& host);

}  // namespace dtrain::net
