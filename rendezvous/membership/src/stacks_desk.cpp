// StacksDesk (stacks_desk.hpp): the built-in session's answers to stack requests.
#include "dtrain/rendezvous/membership/stacks_desk.hpp"

#include <algorithm>
#include <exception>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv {
namespace {
// A GET waits this long at the server, then is asked again.
constexpr std::chrono::milliseconds kSlice{30000};

// `text` as one store value: cut at a line's end, saying so, when it is longer than one may be.
std::string fitted(std::string text) {
  if (text.size() <= wire::kMaxValue) return text;
  std::size_t keep = text.rfind('\n', wire::kMaxValue - 100);
  keep = keep == std::string::npos ? 0 : keep + 1;
  std::size_t cut = text.size() - keep;
  text.resize(keep);
  return text + fmt::format("(the rest cut: {} bytes more than a store value holds)\n", cut);
}
}  // namespace

void StacksDesk::start(const ClientOptions& co, int node_rank, StacksSource source) {
  stop();
  conn_ = connect_store(co);
  node_rank_ = node_rank;
  source_ = std::move(source);
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void StacksDesk::stop() {
  stopping_ = true;
  if (conn_) conn_->close();
  if (thread_.joinable()) thread_.join();
  conn_.reset();
}

void StacksDesk::loop() {
  std::int64_t next = 1;  // the first request this desk has not answered
  while (!stopping_) {
    try {
      conn_->get(stacks_ask_key(next), kSlice);
      std::int64_t last = std::max(next, conn_->add(kStacksAsked, 0));
      std::string text = fitted(source_());
      for (std::int64_t k = next; k <= last; ++k) conn_->set(stacks_answer_key(k, node_rank_), as_bytes(text));
      next = last + 1;
    } catch (const TimeoutError&) {
      continue;
    } catch (const std::exception& e) {
      if (!stopping_) DTRAIN_INFO(rdzv, "stack requests are no longer answered: {}", e.what());
      return;
    }
  }
}

}  // namespace dtrain::rdzv
