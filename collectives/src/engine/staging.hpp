#pragma once
// Host working buffers for the engines that reduce in place over sockets (tcp/, hier/): the
// reduction runs on recv itself, or, for float16/bfloat16, on a float32 copy, so that the whole
// path accumulates in float32 and rounds once at the end.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dtrain/collectives.h"

namespace dtrain::coll {

inline bool is_half(dtrain_dtype_t t) { return t == DTRAIN_FLOAT16 || t == DTRAIN_BFLOAT16; }

class Staging {
 public:
  // The buffer an in-place allreduce of `count` elements runs on, and its dtype.
  struct Work {
    void* buf = nullptr;
    dtrain_dtype_t dtype = DTRAIN_FLOAT32;
  };

  // At least `bytes` bytes of scratch (grows, never shrinks; valid until the next call).
  std::uint8_t* bytes(std::size_t bytes);
  // recv holding send's values (copied when distinct), or a float32 widening of send for halves.
  Work begin(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype);
  // Rounds a float32 work buffer of a half dtype back into recv; nothing otherwise.
  static void finish(const Work& work, void* recv, std::size_t count, dtrain_dtype_t dtype);

 private:
  std::vector<std::uint8_t> buf_;
};

}  // namespace dtrain::coll
