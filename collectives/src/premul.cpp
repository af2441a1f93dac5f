// Premultiplied-sum handles (premul.hpp).
#include "premul.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "reduce.hpp"

namespace dtrain::coll {

dtrain_op_t PremulOps::create(double scale) {
  if (!std::isfinite(scale))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("premul_sum: the scale {} is not finite", scale));
  if (next_ == std::numeric_limits<int>::max())
    throw CollError(DTRAIN_ERR_SYSTEM, "premul_sum: this communicator has created all the ops it can");
  const int op = next_++;
  ops_[op] = scale;
  return static_cast<dtrain_op_t>(op);
}

void PremulOps::destroy(dtrain_op_t op) {
  if (ops_.erase(static_cast<int>(op)) == 0)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("redop_destroy: op {} is not a live premultiplied sum of this communicator",
                                static_cast<int>(op)));
}

void PremulOps::apply(dtrain_op_t op, dtrain_dtype_t dtype, const void* src, void* dst, std::size_t count) const {
  scale_n(src, dst == nullptr ? const_cast<void*>(src) : dst, count, dtype, ops_.at(static_cast<int>(op)));
}

}  // namespace dtrain::coll
