#pragma once
// RAII ownership of libuv handles: "init succeeded => must close; free only in the close callback".
// The handle lives on the heap; close() (or the destructor) hands it to uv_close and the close
// callback frees it, so the owner may be destroyed right after close() while the loop still holds
// the handle. Header-only: included by the libuv users (agent, rendezvous server) alone, so the
// common library itself needs no libuv.
#include <uv.h>

#include <utility>

namespace dtrain {

template <class T>
class UvHandle {
 public:
  UvHandle() = default;
  UvHandle(const UvHandle&) = delete;
  UvHandle& operator=(const UvHandle&) = delete;
  UvHandle(UvHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  ~UvHandle() { close(); }

  // Runs `init(T*)` on a fresh handle (uv_timer_init & co) and sets its data. On success the handle
  // is owned. On failure it is freed at once, unless `closes_on_failure` (uv_spawn: the handle must
  // be closed even when the call fails). Returns the libuv status.
  template <class F>
  int init(F&& init_fn, void* data, bool closes_on_failure = false) {
    close();
    T* h = new T{};
    int rc = std::forward<F>(init_fn)(h);
    if (rc < 0 && !closes_on_failure) {
      delete h;  // libuv does not know the handle: a plain free
      return rc;
    }
    h_ = h;
    h_->data = data;
    if (rc < 0) close();
    return rc;
  }

  T* get() const { return h_; }
  uv_handle_t* handle() const { return reinterpret_cast<uv_handle_t*>(h_); }
  explicit operator bool() const { return h_ != nullptr; }

  void close() noexcept {
    if (h_ == nullptr) return;
    uv_handle_t* h = handle();
    h_ = nullptr;
    h->data = nullptr;
    if (!uv_is_closing(h)) uv_close(h, [](uv_handle_t* x) { delete reinterpret_cast<T*>(x); });
  }

 private:
  T* h_ = nullptr;
};

}  // namespace dtrain
