#pragma once
// The store a single-node job's workers bootstrap their collectives through when the launch names
// none (AgentOptions::embed_store): a rendezvous store server on 127.0.0.1, on a free port, with a
// fresh token, for this run id only. Its thread starts with the first connection (the agent's loop
// watches the listening socket until then): a job whose workers never use it does not pay for
// starting and joining a thread. tests/agent/test_embedded_store.cpp.
#include <uv.h>

#include <memory>
#include <string>

#include "dtrain/common/uv_handle.hpp"
#include "dtrain/rendezvous/server/server.hpp"
#include "event_loop.hpp"

namespace dtrain::agent {

class EmbeddedStore {
 public:
  // Listens (throws IoError when it cannot); serves from the first connection on.
  void start(EventLoop& loop, const std::string& run_id);
  bool started() const { return server_ != nullptr; }
  std::string addr() const;  // "127.0.0.1:PORT"
  const std::string& token() const { return token_; }
  // Stops watching for the first connection (the loop's handle; the server keeps listening).
  void close_watch() { watch_.close(); }
  // Stops the server and joins its thread (any thread but the server's; idempotent).
  void stop();

 private:
  std::string token_;
  std::unique_ptr<rdzv::Server> server_;
  UvHandle<uv_poll_t> watch_;  // the listening socket until its first connection
  EventLoop* loop_ = nullptr;
};

}  // namespace dtrain::agent
