#pragma once
// Premultiplied sums (dtrain_redop_create_premul_sum): op handles of one communicator, from kFirst
// up, each with its scale. A call with such an op scales its input and sums it; the engines see
// DTRAIN_SUM and a fingerprint that says premul_sum.
#include <cstddef>
#include <map>

#include "call.hpp"

namespace dtrain::coll {

class PremulOps {
 public:
  static constexpr int kFirst = 256;

  // A new handle for `scale` (finite); throws DTRAIN_ERR_INVALID_ARGUMENT otherwise.
  dtrain_op_t create(double scale);
  // Refuses (DTRAIN_ERR_INVALID_ARGUMENT) a handle that is not a live one.
  void destroy(dtrain_op_t op);
  // The scale of a live handle; null for any other op.
  const double* scale(dtrain_op_t op) const {
    auto it = ops_.find(static_cast<int>(op));
    return it == ops_.end() ? nullptr : &it->second;
  }
  bool contains(dtrain_op_t op) const { return ops_.count(static_cast<int>(op)) != 0; }
  // `count` elements of src scaled by op's scale into dst (src itself when dst is null).
  void apply(dtrain_op_t op, dtrain_dtype_t dtype, const void* src, void* dst, std::size_t count) const;

 private:
  std::map<int, double> ops_;
  int next_ = kFirst;
};

}  // namespace dtrain::coll
