#pragma once
// What the collectives tests share about calls: every dtype of the C ABI, and the status and text
// a call threw.
#include <string>
#include <utility>

#include "call.hpp"

namespace dtrain::coll::test {

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
