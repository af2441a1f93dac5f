#pragma once
// An rdzv::Store over a caller's dtrain_store_t (dtrain_comm_init_config): the key-value store of a
// framework (torch's TCPStore, FileStore, PrefixStore) through which a communicator bootstraps. The
// callbacks' contract is the header's (collectives.h, "Since 0.3"). A callback that reports
// DTRAIN_STORE_ERROR becomes an IoError, a get's DTRAIN_STORE_TIMEOUT a TimeoutError, each carrying
// the message the callback gave. erase has no callback: it throws InternalError (the collectives
// never erase); barrier is built from add and get.
#include <string>

#include "dtrain/collectives.h"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll {

class CallbackStore final : public rdzv::Store {
 public:
  // Copies the callbacks; s.ctx must stay valid while the store is used. `name`: the group's name
  // for messages ("" for none).
  CallbackStore(const dtrain_store_t& s, std::string name);

  void set(std::string_view key, rdzv::ByteView value) override;
  rdzv::Bytes get(std::string_view key, rdzv::milliseconds timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  rdzv::Bytes compare_set(std::string_view key, rdzv::ByteView expected, rdzv::ByteView desired) override;
  bool check(std::span<const std::string> keys) override;
  bool erase(std::string_view key) override;
  void barrier(std::string_view name, int count, rdzv::milliseconds timeout) override;

 private:
  // Throws for a callback's result other than DTRAIN_STORE_OK.
  void check_rc(int rc, const char* call, std::string_view key, const std::string& reported) const;

  dtrain_store_t s_;
  std::string name_;
};

}  // namespace dtrain::coll
