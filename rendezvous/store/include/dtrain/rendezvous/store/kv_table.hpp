#pragma once
// The store's key-value semantics, one implementation for the rendezvous server and the in-memory
// store: key and value checks, a per-table budget of keys and bytes (and, for the server, the
// budgets of the run and of the whole server that the table also draws on), ADD on decimal text,
// compare-and-set. Pure: no sockets, no libuv, no locking (the server uses one table per scope on
// its loop thread, the in-memory store one table under its mutex). Refusals throw Refused with the
// wire error code the server answers with.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::rdzv {

// The key as a string; Refused bad_request when empty, limit when over wire::kMaxKey bytes.
std::string checked_key(std::string_view key);
// Refused limit when a value of `bytes` is over wire::kMaxValue.
void check_value(std::string_view key, std::size_t bytes);
// "no value for key 'k' after 500 ms": the answer to a GET that timed out.
std::string get_timeout_text(std::string_view key, std::int64_t ms);

struct KvLimits {
  std::size_t max_keys = 200000;       // the defaults of ServerOptions
  std::size_t max_bytes = 512u << 20;  // keys + values
};

// Keys and bytes that several tables draw on together: the server has one for all its runs, each
// run one for all its generations (chained to the server's). All or nothing: a charge that would
// pass any limit along the chain is refused and changes nothing.
class Budget {
 public:
  // `owner` names it in refusals: "run 'r'", "this rendezvous".
  Budget(KvLimits limits, std::string owner, Budget* outer = nullptr)
      : limits_(limits), owner_(std::move(owner)), outer_(outer) {}
  ~Budget();
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // Refused limit naming the first budget along the chain that the change would overdraw.
  void check(std::ptrdiff_t keys, std::ptrdiff_t bytes) const;
  // check(), then applies the change here and along the chain.
  void charge(std::ptrdiff_t keys, std::ptrdiff_t bytes);
  // Gives back what was charged (never refused).
  void release(std::size_t keys, std::size_t bytes) { apply(-std::ptrdiff_t(keys), -std::ptrdiff_t(bytes)); }

  std::size_t keys() const { return keys_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void apply(std::ptrdiff_t keys, std::ptrdiff_t bytes);

  KvLimits limits_;
  std::string owner_;
  Budget* outer_;
  std::size_t keys_ = 0, bytes_ = 0;
};

class KvTable {
 public:
  // `owner` names the table in refusals: "run 'r' generation 2". `outer`, when given, is charged
  // for every key and byte too (the run's budget) and outlives the table.
  KvTable(KvLimits limits, std::string owner, Budget* outer = nullptr)
      : limits_(limits), owner_(std::move(owner)), outer_(outer) {}
  ~KvTable();
  KvTable(const KvTable&) = delete;
  KvTable& operator=(const KvTable&) = delete;

  const Bytes* find(const std::string& key) const;
  bool contains(const std::string& key) const { return map_.count(key) != 0; }
  // Refused limit when the value is too large or the table's budget would be exceeded.
  void set(const std::string& key, Bytes value);
  // Adds delta to the decimal integer at key (missing or empty = 0), stores and returns the sum.
  // Refused bad_request when the value is not an integer or the sum overflows.
  std::int64_t add(const std::string& key, std::int64_t delta);
  // Stores desired when the value equals expected (a missing key matches an empty expected).
  // Returns the value after the call; `swapped` says whether desired was stored.
  Bytes compare_set(const std::string& key, ByteView expected, ByteView desired, bool& swapped);
  // True when the key existed.
  bool erase(const std::string& key);

  std::size_t size() const { return map_.size(); }
  std::size_t bytes() const { return bytes_; }  // keys + values held

 private:
  void store(const std::string& key, Bytes value);

  KvLimits limits_;
  std::string owner_;
  Budget* outer_;
  std::unordered_map<std::string, Bytes> map_;
  std::size_t bytes_ = 0;
};

}  // namespace dtrain::rdzv
