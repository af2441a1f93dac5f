#pragma once
// How the ranks of a TCP group fail together. A failing rank records why in the store
// (<key_prefix>abort: its status, world rank and message) and shuts its sockets down, so peers
// waiting on it stop at once; a rank whose peer broke its connection reports the root cause that
// peer recorded (with its status) when there is one; a rank that times out asks every rank through
// the store where it is (<key_prefix>status/<seq>/<rank>) and names who never reached the call.
#include <atomic>
#include <chrono>
#include <string>

#include "../../call.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "links.hpp"

namespace dtrain::coll::tcp {

class Failures {
 public:
  Failures(Links& links, rdzv::Store& store, std::string key_prefix, std::chrono::milliseconds timeout)
      : links_(links), store_(store), prefix_(std::move(key_prefix)), timeout_(timeout) {}

  // Publishes the failure to the store (the first one wins) and shuts every socket down.
  void abort(dtrain_status_t status, const std::string& msg) noexcept;
  // `call` on this rank lost `peer` (`what`: how the connection ended): throws the root cause the
  // peer recorded, else DTRAIN_ERR_PEER naming it.
  [[noreturn]] void peer_failed(const std::string& call, int peer, const std::string& what);
  // Collective d passed its deadline waiting to send to `to` and/or receive from `from` (-1: not).
  [[noreturn]] void timed_out(const OpDesc& d, int to, int from);

 private:
  Links& links_;
  rdzv::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> aborted_{false};  // abort() may come from another thread (dtrain_comm_abort)
};

}  // namespace dtrain::coll::tcp
