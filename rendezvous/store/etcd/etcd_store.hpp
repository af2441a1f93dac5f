#pragma once
// EtcdStore: the Store contract (dtrain/rendezvous/store/store.hpp) on etcd, with the semantics of the
// built-in store (dtrain/rendezvous/store/kv_table.hpp, store_barrier.hpp): the same key and value
// limits, ADD on the same decimal text, the same refusals and timeout messages.
//
// Every key is prefix + key. A blocking get() reads the key and, when it is missing, watches it
// from the revision of that read, so a set() in between is never missed. add() and compare_set()
// are optimistic transactions (compare the key's mod revision, then put), retried on a conflict.
// A barrier keeps two keys of its own, prefix + "__barrier/" + name + "/round" (the number of
// completed rounds) and ".../arrived" ("N COUNT": callers in the current round and their count):
// an arrival increments arrived in a transaction, the count-th arrival instead erases arrived and
// increments round, which releases the waiters watching round; a caller whose timeout passes takes
// its arrival back (unless the round completed meanwhile, then it returns normally).
//
// Unlike the built-in store, a caller that dies while waiting in a barrier stays counted: the
// prefix is meant to be scoped by generation, which a failure replaces.
//
// Threading: as the Client it uses (any thread; each blocking call has its own watch).
#include <memory>
#include <string>

#include "client.hpp"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::etcd {

class EtcdStore final : public rdzv::Store {
 public:
  EtcdStore(std::shared_ptr<Client> client, std::string prefix);

  void set(std::string_view key, rdzv::ByteView value) override;
  rdzv::Bytes get(std::string_view key, rdzv::milliseconds timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  rdzv::Bytes compare_set(std::string_view key, rdzv::ByteView expected, rdzv::ByteView desired) override;
  bool check(std::span<const std::string> keys) override;
  bool erase(std::string_view key) override;
  void barrier(std::string_view name, int count, rdzv::milliseconds timeout) override;

  const std::string& prefix() const { return prefix_; }
  Client& client() { return *client_; }

 private:
  // prefix + key, after the built-in store's key checks (ConfigError naming `op`).
  std::string full_key(std::string_view op, std::string_view key) const;
  std::string where(std::string_view op) const;  // "etcd store 127.0.0.1:2379 get"

  std::shared_ptr<Client> client_;
  std::string prefix_;
};

}  // namespace dtrain::etcd
