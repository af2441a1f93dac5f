#pragma once
// What the collectives tests share about calls: a call as every rank describes it, every dtype of
// the C ABI, and the status and text a call threw.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "call.hpp"

namespace dtrain::coll::test {

// Call number `seq` of kind `kind` as every rank describes it, with a deadline `timeout` from now.
inline OpDesc op_desc(std::uint64_t seq, OpKind kind, std::size_t count, dtrain_dtype_t dtype,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30), dtrain_op_t op = DTRAIN_SUM,
                      int root = 0) {
  OpDesc d;
  d.seq = seq;
  d.kind = kind;
  d.count = count;
  d.dtype = dtype;
  d.op = op;
  d.root = root;
  d.start = Clock::now();
  d.deadline = d.start + timeout;
  return d;
}

// The dtypes of the C ABI 0.1 (0.3 added bool and int16).
inline constexpr dtrain_dtype_t kAllDtypes[] = {DTRAIN_INT8,    DTRAIN_UINT8,    DTRAIN_INT32,   DTRAIN_INT64,
                                                DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64};

// Runs f and returns the CollError status it threw (SUCCESS when none) and its text.
template <class F>
std::pair<dtrain_status_t, std::string> status_of(F&& f) {
  try {
    f();
    return {DTRAIN_SUCCESS, ""};
  } catch (const CollError& e) {
    return {e.status(), e.what()};
  }
}

}  // namespace dtrain::coll::test
