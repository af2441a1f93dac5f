#include "store_bridge.hpp"

#include <chrono>
#include <exception>
#include <string>
#include <vector>

namespace dtrain_torch {

namespace {

c10d::Store& of(void* ctx) { return *static_cast<c10d::Store*>(ctx); }

std::vector<uint8_t> bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

// Runs f; an exception becomes DTRAIN_STORE_ERROR with its text handed to error().
template <typename F>
int guarded(const char* what, const char* key, dtrain_store_error_fn error, void* error_ctx, F&& f) noexcept {
  try {
    return f();
  } catch (const std::exception& e) {
    if (error != nullptr) {
      const std::string text = std::string("torch store ") + what + " \"" + key + "\": " + e.what();
      error(error_ctx, text.c_str());
    }
  } catch (...) {
    if (error != nullptr) error(error_ctx, "torch store: unknown exception");
  }
  return DTRAIN_STORE_ERROR;
}

int store_set(void* ctx, const char* key, const void* value, size_t len, dtrain_store_error_fn error, void* error_ctx) {
  return guarded("set", key, error, error_ctx, [&] {
    of(ctx).set(key, bytes(value, len));
    return DTRAIN_STORE_OK;
  });
}

// c10d::Store::wait throws on its deadline with a message that differs per store; a wait that threw
// after (about) the whole timeout is taken as the timeout, anything earlier as an error.
int store_get(void* ctx, const char* key, long long timeout_ms, dtrain_store_value_fn value, void* value_ctx,
              dtrain_store_error_fn error, void* error_ctx) {
  const auto start = std::chrono::steady_clock::now();
  const auto timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 1);
  try {
    of(ctx).wait({key}, timeout);
  } catch (const std::exception& e) {
    if (std::chrono::steady_clock::now() - start >= timeout * 9 / 10) return DTRAIN_STORE_TIMEOUT;
    if (error != nullptr) {
      const std::string text = std::string("torch store wait \"") + key + "\": " + e.what();
      error(error_ctx, text.c_str());
    }
    return DTRAIN_STORE_ERROR;
  }
  return guarded("get", key, error, error_ctx, [&] {
    const std::vector<uint8_t> v = of(ctx).get(key);
    value(value_ctx, v.data(), v.size());
    return DTRAIN_STORE_OK;
  });
}

int store_add(void* ctx, const char* key, long long delta, long long* result, dtrain_store_error_fn error,
              void* error_ctx) {
  return guarded("add", key, error, error_ctx, [&] {
    *result = static_cast<long long>(of(ctx).add(key, static_cast<int64_t>(delta)));
    return DTRAIN_STORE_OK;
  });
}

int store_compare_set(void* ctx, const char* key, const void* expected, size_t expected_len, const void* desired,
                      size_t desired_len, dtrain_store_value_fn value, void* value_ctx, dtrain_store_error_fn error,
                      void* error_ctx) {
  return guarded("compare_set", key, error, error_ctx, [&] {
    const std::vector<uint8_t> v = of(ctx).compareSet(key, bytes(expected, expected_len), bytes(desired, desired_len));
    value(value_ctx, v.data(), v.size());
    return DTRAIN_STORE_OK;
  });
}

int store_check(void* ctx, const char* key, int* exists, dtrain_store_error_fn error, void* error_ctx) {
  return guarded("check", key, error, error_ctx, [&] {
    *exists = of(ctx).check({key}) ? 1 : 0;
    return DTRAIN_STORE_OK;
  });
}

}  // namespace

StoreBridge::StoreBridge(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {
  table_.ctx = store_.get();
  table_.set = store_set;
  table_.get = store_get;
  table_.add = store_add;
  table_.compare_set = store_compare_set;
  table_.check = store_check;
}

}  // namespace dtrain_torch
