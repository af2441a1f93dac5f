// How the ranks of a TCP group fail together (failures.hpp).
#include "failures.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "../../store_value.hpp"
#include "wire.hpp"

namespace dtrain::coll::tcp {

std::optional<AbortRecord> parse_abort_record(std::string_view v) {
  std::size_t digits = 0;
  int status = 0;
  while (digits < v.size() && digits < 3 && v[digits] >= '0' && v[digits] <= '9')
    status = status * 10 + (v[digits++] - '0');
  if (digits == 0 || v[0] == '0' || status < DTRAIN_ERR_INVALID_ARGUMENT || status > DTRAIN_ERR_INTERNAL) return std::nullopt;
  std::string_view rest = v.substr(digits);
  if (rest.rfind(" rank ", 0) != 0) return std::nullopt;
  return AbortRecord{static_cast<dtrain_status_t>(status), std::string(rest.substr(1))};
}

void Failures::abort(dtrain_status_t status, const std::string& msg) noexcept {
  if (aborted_.exchange(true)) return;
  try {
    const std::string v = fmt::format("{} rank {}: {}", static_cast<int>(status), links_.world(links_.rank()), msg);
    store_.compare_set(prefix_ + "abort", {}, rdzv::as_bytes(v));
  } catch (...) {
  }
  links_.shutdown();
}

void Failures::give_up(const OpDesc& d, int partial_to) noexcept {
  if (gave_up_) return;
  gave_up_ = true;
  const WireHeader h{kWireMagic, kGiveUp, d.seq, d.fp0(), d.fp1(), 0};
  for (int r = 0; r < links_.size(); ++r)
    if (r != links_.rank() && r != partial_to && links_.fd(r) >= 0)
      (void)::send(links_.fd(r), &h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Failures::confirm(const OpDesc& d) {
  if (polls_.empty())
    for (int r = 0; r < links_.size(); ++r)
      if (r != links_.rank()) polls_.push_back({links_.fd(r), POLLIN, 0});
  if (::poll(polls_.data(), static_cast<nfds_t>(polls_.size()), 0) <= 0) return;
  for (std::size_t i = 0; i < polls_.size(); ++i) {
    if ((polls_[i].revents & POLLIN) == 0) continue;
    WireHeader h{};
    if (::recv(polls_[i].fd, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof h) &&
        h.magic == kWireMagic && h.channel == kGiveUp && h.seq <= d.seq) {  // not a later call's
      const int r = static_cast<int>(i) + (static_cast<int>(i) >= links_.rank() ? 1 : 0);
      peer_failed(d.text(), r, fmt::format("gave up on call #{}", h.seq), true);
    }
  }
}

void Failures::peer_failed(const std::string& call, int peer, const std::string& what, bool gave_up) {
  const int me = links_.world(links_.rank());
  // The peer may have recorded why it gave up: report that root cause with its status.
  try {
    const std::string key = prefix_ + "abort";
    const auto tries = gave_up ? report_wait().count() / 10 + 100 : 20;
    for (long i = 0; i < tries; ++i) {
      std::string keys[1] = {key};
      if (store_.check(keys)) {
        const rdzv::Bytes v = store_.get(key, std::chrono::milliseconds(1000));
        if (auto rec = parse_abort_record(rdzv::to_string(v)))
          throw CollError(rec->status, fmt::format("{} on rank {}: {} failed: {}", call, me, links_.text(peer), rec->text));
        throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: {} failed: {}", call, me, links_.text(peer),
                                                     junk_value_text(key, v, "a failed rank's abort record "
                                                                             "(\"STATUS rank R: MESSAGE\")")));
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
    const auto until = Clock::now() + report_wait();
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
