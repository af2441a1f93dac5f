// Writing text to a descriptor whole (write_all.hpp).
#include "dtrain/agent/write_all.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace dtrain::agent {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace dtrain::agent
