// The header-only C++ wrapper: RAII communicator, span overloads, exceptions.
#include <dtrain/collectives.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    dtrain::Communicator comm;
    std::vector<float> v(1000, static_cast<float>(comm.rank() + 1));
    comm.allreduce(std::span<float>(v), DTRAIN_SUM);
    const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
    for (float x : v)
      if (x != want) return 3;
    try {
      comm.broadcast(std::span<float>(v), 99);  // a bad root must come back as an exception
      return 4;
    } catch (const dtrain::coll_error& e) {
      if (e.status() != DTRAIN_ERR_INVALID_ARGUMENT) return 5;
    }
    std::printf("consumer_cpp rank %d ok\n", comm.rank());
  } catch (const dtrain::coll_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
