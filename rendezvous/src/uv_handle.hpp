#pragma once
// RAII for libuv handles: "init succeeded => must close; free only in the close callback".
// UvHandle<T> heap-allocates the handle; close() (or the destructor) calls uv_close and the close
// callback frees the memory, so the handle outlives any request libuv still completes on it.
#include <uv.h>

#include <utility>

namespace dtrain::rdzv {

template <class T>
class UvHandle {
 public:
  UvHandle() = default;
  UvHandle(const UvHandle&) = delete;
  UvHandle& operator=(const UvHandle&) = delete;
  UvHandle(UvHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  ~UvHandle() { close(); }

  // init(loop, handle) as uv_timer_init & co; returns the libuv status. data is set to `data`.
  template <class Init>
  int init(Init&& init_fn, void* data) {
    close();
    auto* h = new T{};
    int rc = init_fn(h);
    if (rc < 0) {
      delete h;  // init failed: libuv does not know the handle, plain free
      return rc;
    }
    h->data = data;
    h_ = h;
    return 0;
  }

  void close() noexcept {
    if (h_ == nullptr) return;
    auto* base = reinterpret_cast<uv_handle_t*>(h_);
    h_ = nullptr;
    if (!uv_is_closing(base))
      uv_close(base, [](uv_handle_t* x) { delete reinterpret_cast<T*>(x); });
  }

  T* get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T* h_ = nullptr;
};

}  // namespace dtrain::rdzv
