#include "staging.hpp"

#include <cstring>

#include "../call.hpp"
#include "../reduce.hpp"

namespace dtrain::coll {

std::uint8_t* Staging::bytes(std::size_t bytes) {
  if (buf_.size() < bytes) buf_.resize(bytes);
  return buf_.data();
}

Staging::Work Staging::begin(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype) {
  if (is_half(dtype)) {
    auto* f = reinterpret_cast<float*>(bytes(count * sizeof(float)));
    widen_to_float(send, f, count, dtype);
    return {f, DTRAIN_FLOAT32};
  }
  if (count && send != recv) std::memmove(recv, send, count * dtype_size(dtype));
  return {recv, dtype};
}

void Staging::finish(const Work& work, void* recv, std::size_t count, dtrain_dtype_t dtype) {
  if (is_half(dtype)) narrow_from_float(static_cast<const float*>(work.buf), recv, count, dtype);
}

}  // namespace dtrain::coll
