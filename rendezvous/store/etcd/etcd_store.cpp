// EtcdStore's key-value calls (the barrier is in etcd_barrier.cpp).
#include "etcd_store.hpp"

#include <algorithm>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/kv_table.hpp"
#include "dtrain/rendezvous/store/refused.hpp"

namespace dtrain::etcd {

using rdzv::Bytes;
using rdzv::ByteView;
using Clock = std::chrono::steady_clock;

namespace {

// Runs fn (the built-in store's checks); a refusal becomes what a TcpStore throws for it: a limit
// is the user's mistake (ConfigError), anything else an IoError.
template <class F>
auto refusals(const std::string& where, F&& fn) {
  try {
    return fn();
  } catch (const rdzv::Refused& e) {
    if (e.code == rdzv::wire::ErrorCode::limit) throw ConfigError(fmt::format("{}: {}", where, e.what()));
    throw IoError(fmt::format("{}: {}", where, e.what()));
  }
}

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A table holding the key's current value (if any), to apply the built-in store's rules to it.
struct Scratch {
  Scratch(std::string k, const RangeResult& r) : key(std::move(k)) {
    if (!r.kvs.empty()) table.set(key, bytes_of(r.kvs.front().value));
  }
  std::string key;
  rdzv::KvTable table{rdzv::KvLimits{}, "etcd"};
};

std::int64_t mod_revision(const RangeResult& r) { return r.kvs.empty() ? 0 : r.kvs.front().mod_revision; }

// Succeeds when the key is unchanged since r was read (mod revision 0: still missing).
Compare unchanged(const std::string& key, const RangeResult& r) {
  return Compare{key, Compare::Target::mod, Compare::Result::equal, mod_revision(r), {}};
}

}  // namespace

EtcdStore::EtcdStore(std::shared_ptr<Client> client, std::string prefix)
    : client_(std::move(client)), prefix_(std::move(prefix)) {
  DTRAIN_CHECK(client_ != nullptr, "EtcdStore needs a client");
}

std::string EtcdStore::where(std::string_view op) const { return fmt::format("etcd store {} {}", client_->endpoint(), op); }

std::string EtcdStore::full_key(std::string_view op, std::string_view key) const {
  try {
    return prefix_ + rdzv::checked_key(key);
  } catch (const rdzv::Refused& e) {
    throw ConfigError(fmt::format("{}: {}", where(op), e.what()));
  }
}

void EtcdStore::set(std::string_view key, ByteView value) {
  auto k = full_key("set", key);
  refusals(where("set"), [&] { rdzv::check_value(key, value.size()); });
  client_->put(k, rdzv::to_string(value));
}

Bytes EtcdStore::get(std::string_view key, rdzv::milliseconds timeout) {
  auto k = full_key("get", key);
  timeout = std::max(timeout, rdzv::milliseconds(0));
  auto deadline = Clock::now() + timeout;
  auto r = client_->range(k);
  if (!r.kvs.empty()) return bytes_of(r.kvs.front().value);
  auto timed_out = [&] {
    return TimeoutError(fmt::format("{}: {}", where("get"), rdzv::get_timeout_text(key, timeout.count())));
  };
  if (Clock::now() >= deadline) throw timed_out();
  Watch w(*client_, k, {}, r.revision + 1);  // from just after the read: a put in between is seen
  for (;;) {
    auto left = std::chrono::duration_cast<rdzv::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw timed_out();
    for (auto& ev : w.next(left))
      if (ev.type == WatchEvent::Type::put) return bytes_of(ev.kv.value);
  }
}

std::int64_t EtcdStore::add(std::string_view key, std::int64_t delta) {
  auto k = full_key("add", key);
  auto r = client_->range(k);
  for (;;) {
    Scratch s(std::string(key), r);
    std::int64_t sum = refusals(where("add"), [&] { return s.table.add(s.key, delta); });
    auto t = client_->txn({unchanged(k, r)}, {Op::put(k, std::to_string(sum))}, {Op::range(k)});
    if (t.succeeded) return sum;
    r = std::move(t.ranges.at(0));  // another caller got in first: again, on its value
  }
}

Bytes EtcdStore::compare_set(std::string_view key, ByteView expected, ByteView desired) {
  auto k = full_key("compare_set", key);
  auto r = client_->range(k);
  for (;;) {
    Scratch s(std::string(key), r);
    bool swapped = false;
    Bytes after = refusals(where("compare_set"), [&] { return s.table.compare_set(s.key, expected, desired, swapped); });
    if (!swapped) return after;
    auto t = client_->txn({unchanged(k, r)}, {Op::put(k, rdzv::to_string(desired))}, {Op::range(k)});
    if (t.succeeded) return after;
    r = std::move(t.ranges.at(0));
  }
}

bool EtcdStore::check(std::span<const std::string> keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(full_key("check", k));  // every key is checked, as the server does
  constexpr std::size_t kChunk = 64;  // etcd allows 128 operations in one transaction
  for (std::size_t i = 0; i < full.size(); i += kChunk) {
    std::vector<Op> ops;
    for (std::size_t j = i; j < std::min(full.size(), i + kChunk); ++j) ops.push_back(Op::range(full[j]));
    auto t = client_->txn({}, ops);
    for (const auto& r : t.ranges)
      if (r.kvs.empty()) return false;
  }
  return true;
}

bool EtcdStore::erase(std::string_view key) { return client_->erase(full_key("erase", key)) > 0; }

}  // namespace dtrain::etcd
