#include "dtrain/rendezvous/store/kv_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "dtrain/rendezvous/store/refused.hpp"

namespace dtrain::rdzv {

using wire::ErrorCode;

std::string checked_key(std::string_view key) {
  if (key.empty()) throw Refused(ErrorCode::bad_request, "empty key");
  if (key.size() > wire::kMaxKey)
    throw Refused(ErrorCode::limit, fmt::format("key of {} bytes exceeds the {}-byte limit", key.size(), wire::kMaxKey));
  return std::string(key);
}

void check_value(std::string_view key, std::size_t bytes) {
  if (bytes > wire::kMaxValue)
    throw Refused(ErrorCode::limit,
                  fmt::format("value for '{}' of {} bytes exceeds the {}-byte limit", key, bytes, wire::kMaxValue));
}

std::string get_timeout_text(std::string_view key, std::int64_t ms) {
  return fmt::format("no value for key '{}' after {} ms", key, ms);
}

Budget::~Budget() {
  if (outer_ != nullptr) outer_->release(keys_, bytes_);
}

void Budget::check(std::ptrdiff_t keys, std::ptrdiff_t bytes) const {
  for (const Budget* b = this; b != nullptr; b = b->outer_) {
    if (keys > 0 && b->keys_ + std::size_t(keys) > b->limits_.max_keys)
      throw Refused(ErrorCode::limit, fmt::format("{} holds {} keys, the limit", b->owner_, b->limits_.max_keys));
    if (bytes > 0 && b->bytes_ + std::size_t(bytes) > b->limits_.max_bytes)
      throw Refused(ErrorCode::limit, fmt::format("{} would hold {} bytes, over the {}-byte limit", b->owner_,
                                                  b->bytes_ + std::size_t(bytes), b->limits_.max_bytes));
  }
}

void Budget::charge(std::ptrdiff_t keys, std::ptrdiff_t bytes) {
  check(keys, bytes);
  apply(keys, bytes);
}

void Budget::apply(std::ptrdiff_t keys, std::ptrdiff_t bytes) {
  for (Budget* b = this; b != nullptr; b = b->outer_) {
    b->keys_ = std::size_t(std::ptrdiff_t(b->keys_) + keys);
    b->bytes_ = std::size_t(std::ptrdiff_t(b->bytes_) + bytes);
  }
}

KvTable::~KvTable() {
  if (outer_ != nullptr) outer_->release(map_.size(), bytes_);
}

const Bytes* KvTable::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

void KvTable::set(const std::string& key, Bytes value) {
  check_value(key, value.size());
  store(key, std::move(value));
}

std::int64_t KvTable::add(const std::string& key, std::int64_t delta) {
  std::int64_t v = 0;
  if (const Bytes* cur = find(key); cur != nullptr && !cur->empty()) {
    const char* first = reinterpret_cast<const char*>(cur->data());
    const char* last = first + cur->size();
    auto [p, ec] = std::from_chars(first, last, v);
    if (ec != std::errc{} || p != last)
      throw Refused(ErrorCode::bad_request, fmt::format("add '{}': the value is not an integer", key));
  }
  std::int64_t sum = 0;
  if (__builtin_add_overflow(v, delta, &sum))
    throw Refused(ErrorCode::bad_request,
                  fmt::format("add '{}': {} + {} overflows a 64-bit integer", key, v, delta));
  auto text = std::to_string(sum);
  store(key, Bytes(text.begin(), text.end()));
  return sum;
}

Bytes KvTable::compare_set(const std::string& key, ByteView expected, ByteView desired, bool& swapped) {
  check_value(key, desired.size());
  const Bytes* cur = find(key);
  swapped = cur == nullptr ? expected.empty()
                           : std::equal(cur->begin(), cur->end(), expected.begin(), expected.end());
  if (!swapped) return cur == nullptr ? Bytes{} : *cur;
  store(key, Bytes(desired.begin(), desired.end()));
  return Bytes(desired.begin(), desired.end());
}

bool KvTable::erase(const std::string& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  std::size_t freed = key.size() + it->second.size();
  bytes_ -= freed;
  map_.erase(it);
  if (outer_ != nullptr) outer_->release(1, freed);
  return true;
}

void KvTable::store(const std::string& key, Bytes value) {
  auto it = map_.find(key);
  std::size_t old = it == map_.end() ? 0 : key.size() + it->second.size();
  if (it == map_.end() && map_.size() >= limits_.max_keys)
    throw Refused(ErrorCode::limit, fmt::format("{} holds {} keys, the limit", owner_, limits_.max_keys));
  std::size_t after = bytes_ - old + key.size() + value.size();
  if (after > limits_.max_bytes)
    throw Refused(ErrorCode::limit,
                  fmt::format("{} would hold {} bytes, over the {}-byte limit", owner_, after, limits_.max_bytes));
  if (outer_ != nullptr)
    outer_->charge(it == map_.end() ? 1 : 0, std::ptrdiff_t(after) - std::ptrdiff_t(bytes_));
  bytes_ = after;
  if (it == map_.end())
    map_.emplace(key, std::move(value));
  else
    it->second = std::move(value);
}

}  // namespace dtrain::rdzv
