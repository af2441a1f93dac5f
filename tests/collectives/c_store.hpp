#pragma once
// A dtrain_store_t (the C ABI's caller-supplied store, collectives.h "Since 0.3") over an rdzv::Store,
// as a framework backend wraps its own store: each callback runs the store's call and reports an
// exception's text through error(). `fail_all` makes every callback fail with kFailText, and
// `get_timeouts` makes get report DTRAIN_STORE_TIMEOUT, to test how the library reports them.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "dtrain/collectives.h"
#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::test {

struct CStore {
  static constexpr const char* kFailText = "the test store refuses this call";
  std::shared_ptr<rdzv::Store> base;
  std::atomic<bool> fail_all{false};
  std::atomic<bool> get_timeouts{false};
  dtrain_store_t c{};

  explicit CStore(std::shared_ptr<rdzv::Store> b) : base(std::move(b)) {
    c.ctx = this;
    c.set = [](void* ctx, const char* key, const void* value, size_t len, dtrain_store_error_fn error,
               void* ectx) {
      return call(ctx, error, ectx, [&](CStore& s) {
        s.base->set(key, rdzv::ByteView(static_cast<const std::uint8_t*>(value), len));
      });
    };
    c.get = [](void* ctx, const char* key, long long timeout_ms, dtrain_store_value_fn value, void* vctx,
               dtrain_store_error_fn error, void* ectx) {
      auto* s = static_cast<CStore*>(ctx);
      if (s->get_timeouts) {
        if (error != nullptr) error(ectx, "the test store's get timed out");
        return static_cast<int>(DTRAIN_STORE_TIMEOUT);
      }
      return call(ctx, error, ectx, [&](CStore& st) {
        rdzv::Bytes v = st.base->get(key, std::chrono::milliseconds(timeout_ms));
        value(vctx, v.data(), v.size());
      });
    };
    c.add = [](void* ctx, const char* key, long long delta, long long* result, dtrain_store_error_fn error,
               void* ectx) {
      return call(ctx, error, ectx, [&](CStore& s) { *result = s.base->add(key, delta); });
    };
    c.compare_set = [](void* ctx, const char* key, const void* expected, size_t elen, const void* desired,
                       size_t dlen, dtrain_store_value_fn value, void* vctx, dtrain_store_error_fn error, void* ectx) {
      return call(ctx, error, ectx, [&](CStore& s) {
        rdzv::Bytes v = s.base->compare_set(key, rdzv::ByteView(static_cast<const std::uint8_t*>(expected), elen),
                                            rdzv::ByteView(static_cast<const std::uint8_t*>(desired), dlen));
        value(vctx, v.data(), v.size());
      });
    };
    c.check = [](void* ctx, const char* key, int* exists, dtrain_store_error_fn error, void* ectx) {
      return call(ctx, error, ectx, [&](CStore& s) {
        const std::string k[1] = {key};
        *exists = s.base->check(k) ? 1 : 0;
      });
    };
  }

 private:
  template <class F>
  static int call(void* ctx, dtrain_store_error_fn error, void* ectx, F&& f) {
    auto& s = *static_cast<CStore*>(ctx);
    if (s.fail_all) {
      if (error != nullptr) error(ectx, kFailText);
      return DTRAIN_STORE_ERROR;
    }
    try {
      f(s);
      return DTRAIN_STORE_OK;
    } catch (const TimeoutError& e) {
      if (error != nullptr) error(ectx, e.what());
      return DTRAIN_STORE_TIMEOUT;
    } catch (const std::exception& e) {
      if (error != nullptr) error(ectx, e.what());
      return DTRAIN_STORE_ERROR;
    }
  }
};

}  // namespace dtrain::coll::test
