// The header-only C++ wrapper: RAII communicator, span overloads, exceptions, groups and
// point-to-point.
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
    // The data group of a job without a parallel section is the whole world.
    dtrain::Communicator data = dtrain::Communicator::group(DTRAIN_GROUP_DATA);
    if (data.size() != comm.size() || data.rank() != comm.rank()) return 6;
    const int n = data.size(), next = data.rank() + 1 < n ? data.rank() + 1 : dtrain::proc_null;
    const int prev = data.rank() > 0 ? data.rank() - 1 : dtrain::proc_null;
    std::vector<double> act(3, data.rank()), grad(3, -1.0);
    data.sendrecv(std::span<const double>(act), next, std::span<double>(grad), next);
    data.sendrecv(std::span<const double>(act), prev, std::span<double>(grad), prev);
    if (prev != dtrain::proc_null && grad[2] != prev) return 7;
    dtrain::Communicator none = comm.split(DTRAIN_UNDEFINED, 0);
    if (none) return 8;
    std::printf("consumer_cpp rank %d ok\n", comm.rank());
  } catch (const dtrain::coll_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
