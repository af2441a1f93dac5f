#pragma once
// The key-value store interface that the agent and the collectives library bootstrap through.
// Implementations: TcpStore (client of the rendezvous server, client.hpp) and MemoryStore (in
// process, for ranks-as-threads tests). Keys are already scoped by run id and restart generation by
// the implementation (a TcpStore is opened for one run id and generation), so callers use short
// keys such as "nccl/id". Values are bytes.
//
// Errors: TimeoutError when a blocking call passes its timeout, IoError when the server is gone,
// AuthError when refused (see dtrain/common/errors.hpp).
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::rdzv {

using Bytes = std::vector<std::uint8_t>;
using ByteView = std::span<const std::uint8_t>;
using std::chrono::milliseconds;

inline ByteView as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}
inline std::string to_string(ByteView b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(std::string_view key, ByteView value) = 0;
  // Blocks until the key exists, then returns its value; TimeoutError after `timeout`.
  virtual Bytes get(std::string_view key, milliseconds timeout) = 0;
  // Atomically adds delta to the integer at key (missing = 0) and returns the new value.
  virtual std::int64_t add(std::string_view key, std::int64_t delta) = 0;
  // Sets key to desired if its value equals expected (missing key matches an empty expected).
  // Returns the value after the call.
  virtual Bytes compare_set(std::string_view key, ByteView expected, ByteView desired) = 0;
  // True when every key exists, without blocking.
  virtual bool check(std::span<const std::string> keys) = 0;
  // Removes key; true when it existed.
  virtual bool erase(std::string_view key) = 0;
  // Returns once `count` callers have entered the barrier `name`; TimeoutError after `timeout`
  // naming how many arrived.
  virtual void barrier(std::string_view name, int count, milliseconds timeout) = 0;
};

// In-process store shared by threads (tests, ranks as threads).
std::shared_ptr<Store> make_memory_store();

}  // namespace dtrain::rdzv
