#pragma once
// A view of a store whose keys all carry a prefix: the NCCL communicator of a split group bootstraps
// through it, so its "nccl/id" becomes "<group prefix>nccl/id" and never meets another group's.
#include <string>
#include <vector>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll {

class ScopedStore final : public rdzv::Store {
 public:
  ScopedStore(rdzv::Store& base, std::string prefix) : base_(base), prefix_(std::move(prefix)) {}

  void set(std::string_view key, rdzv::ByteView value) override { base_.set(scoped(key), value); }
  rdzv::Bytes get(std::string_view key, rdzv::milliseconds timeout) override { return base_.get(scoped(key), timeout); }
  std::int64_t add(std::string_view key, std::int64_t delta) override { return base_.add(scoped(key), delta); }
  rdzv::Bytes compare_set(std::string_view key, rdzv::ByteView expected, rdzv::ByteView desired) override {
    return base_.compare_set(scoped(key), expected, desired);
  }
  bool check(std::span<const std::string> keys) override {
    std::vector<std::string> k;
    for (const auto& key : keys) k.push_back(scoped(key));
    return base_.check(k);
  }
  bool erase(std::string_view key) override { return base_.erase(scoped(key)); }
  void barrier(std::string_view name, int count, rdzv::milliseconds timeout) override {
    base_.barrier(scoped(name), count, timeout);
  }

 private:
  std::string scoped(std::string_view key) const { return prefix_ + std::string(key); }

  rdzv::Store& base_;
  std::string prefix_;
};

}  // namespace dtrain::coll
