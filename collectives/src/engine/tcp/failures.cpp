// How the ranks of a TCP group fail together (failures.hpp).
#include "failures.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace dtrain::coll::tcp {

void Failures::abort(dtrain_status_t status, const std::string& msg) noexcept {
  if (aborted_.exchange(true)) return;
  try {
    const std::string v = fmt::format("{} rank {}: {}", static_cast<int>(status), links_.world(links_.rank()), msg);
    store_.compare_set(prefix_ + "abort", {}, rdzv::as_bytes(v));
  } catch (...) {
  }
  links_.shutdown();
}

void Failures::peer_failed(const std::string& call, int peer, const std::string& what) {
  const int me = links_.world(links_.rank());
  // The peer may have recorded why it gave up: report that root cause with its status.
  try {
    const std::string key = prefix_ + "abort";
    for (int i = 0; i < 20; ++i) {
      std::string keys[1] = {key};
      if (store_.check(keys)) {
        std::string v = rdzv::to_string(store_.get(key, std::chrono::milliseconds(1000)));
        int st = 0;
        int used = 0;
        std::sscanf(v.c_str(), "%d %n", &st, &used);
        auto status = st > 0 ? static_cast<dtrain_status_t>(st) : DTRAIN_ERR_PEER;
        throw CollError(status, fmt::format("{} on rank {}: {} failed: {}", call, me, links_.text(peer),
                                            v.substr(std::min(static_cast<std::size_t>(used), v.size()))));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const CollError&) {
    throw;
  } catch (...) {
  }
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: {} {}", call, me, links_.text(peer), what));
}

void Failures::timed_out(const OpDesc& d, int to, int from) {
  std::string waiting;
  if (from >= 0) waiting = fmt::format("waiting for data from {}", links_.text(from));
  if (to >= 0) waiting += fmt::format("{}waiting to send to {}", waiting.empty() ? "" : ", ", links_.text(to));
  // Ask everyone where they are: ranks stuck in the same call time out too and report here.
  std::string where;
  try {
    const std::string base = fmt::format("{}status/{}/", prefix_, d.seq);
    store_.set(base + std::to_string(links_.rank()), rdzv::as_bytes(fmt::format("in {} ({})", d.text(), waiting)));
    const auto until = Clock::now() + std::min<std::chrono::milliseconds>(timeout_ / 4, std::chrono::seconds(2));
    std::vector<std::string> keys;
    for (int r = 0; r < links_.size(); ++r) keys.push_back(base + std::to_string(r));
    while (Clock::now() < until && !store_.check(keys)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int r = 0; r < links_.size(); ++r) {
      if (r == links_.rank()) continue;
      std::string k[1] = {keys[static_cast<std::size_t>(r)]};
      if (store_.check(k))
        where += fmt::format("; rank {}: {}", links_.world(r),
                             rdzv::to_string(store_.get(k[0], std::chrono::milliseconds(1000))));
      else
        where += fmt::format("; rank {}: no report (never reached call #{}, or dead)", links_.world(r), d.seq);
    }
  } catch (...) {
  }
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}, {}{}", d.text(),
                                                  seconds_text(d.timeout()), links_.world(links_.rank()), waiting, where));
}

}  // namespace dtrain::coll::tcp
