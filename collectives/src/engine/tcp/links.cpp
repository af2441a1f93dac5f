// The TCP engine's sockets (links.hpp).
#include "links.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"

namespace dtrain::coll::tcp {

Links::Links(std::vector<int> members, int rank)
    : members_(std::move(members)), rank_(rank), peers_(members_.size()) {
  DTRAIN_CHECK(rank_ >= 0 && rank_ < size(), "rank {} of {}", rank_, size());
}

Links::Links(Links&& other) noexcept
    : members_(std::move(other.members_)), rank_(other.rank_), peers_(std::move(other.peers_)) {
  other.peers_.clear();
}

Links::~Links() {
  for (auto& p : peers_)
    if (p.fd >= 0) ::close(p.fd);
}

std::string Links::text(int r) const {
  const Peer& p = peer(r);
  if (p.host == p.addr || p.host.empty())
    return fmt::format("rank {} (address {}, port {})", world(r), p.addr, p.port);
  return fmt::format("rank {} (host {}, address {}, port {})", world(r), p.host, p.addr, p.port);
}

void Links::shutdown() noexcept {
  for (auto& p : peers_)
    if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
}

}  // namespace dtrain::coll::tcp
