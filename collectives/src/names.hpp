#pragma once
// Names of the C ABI's dtypes and reduction ops, for messages (shared by every engine).
#include "dtrain/collectives.h"

namespace dtrain::coll {

inline const char* dtype_name(dtrain_dtype_t dtype) noexcept {
  switch (dtype) {
    case DTRAIN_INT8: return "int8";
    case DTRAIN_UINT8: return "uint8";
    case DTRAIN_INT32: return "int32";
    case DTRAIN_INT64: return "int64";
    case DTRAIN_FLOAT16: return "float16";
    case DTRAIN_BFLOAT16: return "bfloat16";
    case DTRAIN_FLOAT32: return "float32";
    case DTRAIN_FLOAT64: return "float64";
    case DTRAIN_BOOL: return "bool";
    case DTRAIN_INT16: return "int16";
  }
  return "unknown-dtype";
}

inline const char* op_name(dtrain_op_t op) noexcept {
  switch (op) {
    case DTRAIN_SUM: return "sum";
    case DTRAIN_PROD: return "prod";
    case DTRAIN_MIN: return "min";
    case DTRAIN_MAX: return "max";
    case DTRAIN_AVG: return "avg";
    case DTRAIN_BAND: return "band";
    case DTRAIN_BOR: return "bor";
    case DTRAIN_BXOR: return "bxor";
    case DTRAIN_PREMUL_SUM: return "premul_sum";
  }
  return "unknown-op";
}

}  // namespace dtrain::coll
