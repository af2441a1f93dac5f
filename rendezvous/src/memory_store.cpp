// In-process Store for ranks-as-threads tests: one map under a mutex, blocking gets on a condvar.
#include <condition_variable>
#include <map>
#include <mutex>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store.hpp"

namespace dtrain::rdzv {
namespace {

class MemoryStore final : public Store {
 public:
  void set(std::string_view key, ByteView value) override {
    {
      std::lock_guard lock(mu_);
      data_[std::string(key)] = Bytes(value.begin(), value.end());
    }
    cv_.notify_all();
  }

  Bytes get(std::string_view key, milliseconds timeout) override {
    std::unique_lock lock(mu_);
    auto k = std::string(key);
    if (!cv_.wait_for(lock, timeout, [&] { return data_.count(k) != 0; }))
      throw TimeoutError(fmt::format("store get '{}': no value after {} ms", key, timeout.count()));
    return data_[k];
  }

  std::int64_t add(std::string_view key, std::int64_t delta) override {
    std::int64_t v;
    {
      std::lock_guard lock(mu_);
      auto& cell = data_[std::string(key)];
      v = cell.empty() ? 0 : std::stoll(to_string(cell));
      v += delta;
      auto text = std::to_string(v);
      cell.assign(text.begin(), text.end());
    }
    cv_.notify_all();
    return v;
  }

  Bytes compare_set(std::string_view key, ByteView expected, ByteView desired) override {
    Bytes result;
    {
      std::lock_guard lock(mu_);
      auto k = std::string(key);
      auto it = data_.find(k);
      bool match = it == data_.end() ? expected.empty()
                                     : std::equal(it->second.begin(), it->second.end(), expected.begin(),
                                                  expected.end());
      if (match) data_[k] = Bytes(desired.begin(), desired.end());
      result = data_.count(k) ? data_[k] : Bytes{};
    }
    cv_.notify_all();
    return result;
  }

  bool check(std::span<const std::string> keys) override {
    std::lock_guard lock(mu_);
    for (const auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  }

  bool erase(std::string_view key) override {
    std::lock_guard lock(mu_);
    return data_.erase(std::string(key)) != 0;
  }

  void barrier(std::string_view name, int count, milliseconds timeout) override {
    std::unique_lock lock(mu_);
    auto& b = barriers_[std::string(name)];
    std::uint64_t round = b.round;
    if (++b.arrived == count) {
      b.arrived = 0;
      ++b.round;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, timeout, [&] { return b.round != round; })) {
      int arrived = b.arrived;
      --b.arrived;
      throw TimeoutError(
          fmt::format("barrier '{}': {} of {} arrived after {} ms", name, arrived, count, timeout.count()));
    }
  }

 private:
  struct Barrier {
    int arrived = 0;
    std::uint64_t round = 0;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> data_;
  std::map<std::string, Barrier> barriers_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store() { return std::make_shared<MemoryStore>(); }

}  // namespace dtrain::rdzv
