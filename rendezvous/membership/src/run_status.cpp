// `dtrain status`'s questions to the built-in rendezvous (run_status.hpp).
#include "dtrain/rendezvous/membership/run_status.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv {
namespace {
using wire::Frame;
using wire::Op;
constexpr std::chrono::milliseconds kOpTimeout{60000};

// `opts` in the scope of `st`'s run and latest generation (where its nodes keep their keys)
ClientOptions scope_of(const ClientOptions& opts, const RunStatus& st) {
  ClientOptions co = opts;
  co.run_id = st.run_id;
  co.generation = static_cast<int>(st.generation);
  return co;
}
}  // namespace

std::string progress_key(int node_rank) { return fmt::format("dtrain/progress/node-{}", node_rank); }
std::string figures_key(int node_rank) { return fmt::format("dtrain/figures/node-{}", node_rank); }

std::string stacks_ask_key(std::int64_t request) { return fmt::format("dtrain/stacks/ask-{}", request); }

std::string stacks_answer_key(std::int64_t request, int node_rank) {
  return fmt::format("dtrain/stacks/answer-{}/node-{}", request, node_rank);
}

std::vector<std::string> list_runs(const ClientOptions& opts) {
  auto s = connect_store(opts);
  Frame r = s->call(Frame(Op::list_runs), kOpTimeout);
  std::vector<std::string> out;
  for (const auto& a : r.args) out.push_back(to_string(a));
  return out;
}

std::vector<std::string> query_progress(const ClientOptions& opts, const RunStatus& st) {
  std::vector<std::string> out(st.nodes.size());
  if (st.nodes.empty()) return out;
  auto s = connect_store(scope_of(opts, st));
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    if (st.nodes[i].node_rank < 0) continue;
    std::vector<std::string> key{progress_key(st.nodes[i].node_rank)};
    if (s->check(key)) out[i] = to_string(s->get(key[0], kOpTimeout));
  }
  return out;
}

std::vector<std::optional<std::string>> query_stacks(const ClientOptions& opts, const RunStatus& st,
                                                     const std::vector<int>& ask, std::chrono::milliseconds wait) {
  std::vector<std::optional<std::string>> out(ask.size());
  if (ask.empty()) return out;
  auto deadline = std::chrono::steady_clock::now() + wait;
  auto s = connect_store(scope_of(opts, st));
  std::int64_t request = s->add(kStacksAsked, 1);
  s->set(stacks_ask_key(request), as_bytes("1"));
  // each answer in turn: a GET parks at the server until that node's desk stored it
  for (std::size_t i = 0; i < ask.size(); ++i) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::string key = stacks_answer_key(request, ask[i]);
    try {
      out[i] = to_string(s->get(key, std::max(left, std::chrono::milliseconds(1))));
      s->erase(key);
    } catch (const TimeoutError&) {
    }
  }
  return out;
}

RunStatus query_status(const ClientOptions& opts, const std::string& run_id) {
  auto s = connect_store(opts);
  Frame r = s->call(Frame(Op::status).str(run_id), kOpTimeout);
  try {
    return unpack_run_status(r.bytes_at(0));
  } catch (const wire::ProtocolError& e) {
    throw IoError(fmt::format("rendezvous {}: bad status reply: {}", s->endpoint(), e.what()));
  }
}

}  // namespace dtrain::rdzv
