// In-process Store for ranks-as-threads tests: the server's key-value table and barrier semantics
// (kv_table.hpp, store_barrier.hpp) under one mutex, blocking calls on a condvar. A
// refused call throws what a TcpStore throws for the server's refusal.
#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/client.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "dtrain/rendezvous/store/kv_table.hpp"
#include "dtrain/rendezvous/store/store_barrier.hpp"

namespace dtrain::rdzv {
namespace {

// Runs fn; a refusal becomes the exception a TcpStore throws for the same error reply.
template <class F>
auto guarded(std::string_view op, F&& fn) {
  try {
    return fn();
  } catch (const Refused& e) {
    throw_error_reply(wire::Frame(wire::Op::error).i64(std::int64_t(e.code)).str(e.what()),
                      fmt::format("memory store {}", op));
  }
}

// The checked key; a bad key is a ConfigError, as TcpStore reports it before sending.
std::string key_for(std::string_view op, std::string_view key) {
  try {
    return checked_key(key);
  } catch (const Refused& e) {
    throw ConfigError(fmt::format("memory store {}: {}", op, e.what()));
  }
}

class MemoryStore final : public Store {
 public:
  void set(std::string_view key, ByteView value) override {
    {
      std::lock_guard lock(mu_);
      auto k = key_for("set", key);
      guarded("set", [&] { table_.set(k, Bytes(value.begin(), value.end())); });
    }
    cv_.notify_all();
  }

  Bytes get(std::string_view key, milliseconds timeout) override {
    std::unique_lock lock(mu_);
    auto k = key_for("get", key);
    if (!cv_.wait_for(lock, timeout, [&] { return table_.contains(k); }))
      throw TimeoutError(fmt::format("memory store get: {}", get_timeout_text(k, std::max<std::int64_t>(timeout.count(), 0))));
    return *table_.find(k);
  }

  std::int64_t add(std::string_view key, std::int64_t delta) override {
    std::int64_t v;
    {
      std::lock_guard lock(mu_);
      auto k = key_for("add", key);
      v = guarded("add", [&] { return table_.add(k, delta); });
    }
    cv_.notify_all();
    return v;
  }

  Bytes compare_set(std::string_view key, ByteView expected, ByteView desired) override {
    Bytes after;
    {
      std::lock_guard lock(mu_);
      bool swapped = false;
      auto k = key_for("compare_set", key);
      after = guarded("compare_set", [&] { return table_.compare_set(k, expected, desired, swapped); });
    }
    cv_.notify_all();
    return after;
  }

  bool check(std::span<const std::string> keys) override {
    std::lock_guard lock(mu_);
    bool all = true;
    for (const auto& k : keys)  // every key is checked, as the server does
      if (!table_.contains(key_for("check", k))) all = false;
    return all;
  }

  bool erase(std::string_view key) override {
    std::lock_guard lock(mu_);
    return table_.erase(key_for("erase", key));
  }

  void barrier(std::string_view name, int count, milliseconds timeout) override {
    std::unique_lock lock(mu_);
    bool released = false;
    auto n = key_for("barrier", name);
    if (auto all = guarded("barrier", [&] { return barriers_.arrive(n, count, &released); })) {
      for (bool* w : *all) *w = true;
      lock.unlock();
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, timeout, [&] { return released; })) {
      auto text = barriers_.timeout_text(n, std::max<std::int64_t>(timeout.count(), 0));
      barriers_.leave(n, &released);
      throw TimeoutError(fmt::format("memory store barrier: {}", text));
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  KvTable table_{KvLimits{}, "the in-memory store"};
  StoreBarriers<bool*> barriers_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store() { return std::make_shared<MemoryStore>(); }

}  // namespace dtrain::rdzv
