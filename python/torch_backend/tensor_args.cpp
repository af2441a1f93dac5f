#include "tensor_args.hpp"

#include <c10/util/Exception.h>

#include "device.hpp"

namespace dtrain_torch {

namespace {

// dtrain's dtype for a scalar type and how many of them one element is; false when it has none.
bool dtype_of(at::ScalarType t, dtrain_dtype_t* d, size_t* units) {
  *units = 1;
  switch (t) {
    case at::kBool: *d = DTRAIN_BOOL; return true;
    case at::kByte: *d = DTRAIN_UINT8; return true;
    case at::kChar: *d = DTRAIN_INT8; return true;
    case at::kShort: *d = DTRAIN_INT16; return true;
    case at::kInt: *d = DTRAIN_INT32; return true;
    case at::kLong: *d = DTRAIN_INT64; return true;
    case at::kHalf: *d = DTRAIN_FLOAT16; return true;
    case at::kBFloat16: *d = DTRAIN_BFLOAT16; return true;
    case at::kFloat: *d = DTRAIN_FLOAT32; return true;
    case at::kDouble: *d = DTRAIN_FLOAT64; return true;
    case at::kComplexFloat:
      *d = DTRAIN_FLOAT32;
      *units = 2;
      return true;
    case at::kComplexDouble:
      *d = DTRAIN_FLOAT64;
      *units = 2;
      return true;
    default: return false;
  }
}

bool floating(at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); }

}  // namespace

bool reducible(at::ScalarType t) {
  dtrain_dtype_t d;
  size_t units;
  return dtype_of(t, &d, &units);
}

size_t units_per_element(at::ScalarType t) {
  dtrain_dtype_t d;
  size_t units;
  return dtype_of(t, &d, &units) ? units : c10::elementSize(t);
}

Span span_of(const at::Tensor& t, bool reduce, const char* op) {
  Span s;
  s.ptr = t.data_ptr();
  size_t units = 1;
  if (dtype_of(t.scalar_type(), &s.dtype, &units)) {
    s.count = static_cast<size_t>(t.numel()) * units;
    return s;
  }
  TORCH_CHECK(!reduce, "dtrain backend: ", op, " cannot reduce tensors of dtype ", t.scalar_type(),
              " (reductions take bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, "
              "complex64 and complex128)");
  s.dtype = DTRAIN_UINT8;
  s.count = static_cast<size_t>(t.nbytes());
  return s;
}

Reduction reduction_of(const c10d::ReduceOp& r, at::ScalarType t, const char* op) {
  const bool complex = at::isComplexType(t);
  const bool integral = at::isIntegralType(t, /*includeBool=*/true);
  Reduction out;
  switch (r.op_) {
    case c10d::ReduceOp::SUM: out.op = DTRAIN_SUM; return out;
    case c10d::ReduceOp::AVG: out.op = DTRAIN_AVG; return out;
    case c10d::ReduceOp::PRODUCT: out.op = DTRAIN_PROD; break;
    case c10d::ReduceOp::MIN: out.op = DTRAIN_MIN; break;
    case c10d::ReduceOp::MAX: out.op = DTRAIN_MAX; break;
    case c10d::ReduceOp::BAND: out.op = DTRAIN_BAND; break;
    case c10d::ReduceOp::BOR: out.op = DTRAIN_BOR; break;
    case c10d::ReduceOp::BXOR: out.op = DTRAIN_BXOR; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(floating(t), "dtrain backend: ", op, " with PREMUL_SUM takes floating tensors, not ", t);
      const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(r.supplement_.get());
      TORCH_CHECK(s != nullptr, "dtrain backend: ", op,
                  " got PREMUL_SUM without its factor (make it with torch.distributed._make_nccl_premul_sum)");
      out.premul = true;
      const at::Tensor factor = premul_tensor_of(*s, 0);
      if (!factor.defined()) {
        out.scale = s->double_factor;
      } else {
        TORCH_CHECK(factor.numel() == 1, "dtrain backend: ", op,
                    " takes one PREMUL_SUM factor (a float or a 1-element tensor)");
        out.scale = factor.item<double>();
      }
      return out;
    }
    default: TORCH_CHECK(false, "dtrain backend: ", op, " got an unknown ReduceOp (", int(r.op_), ")");
  }
  TORCH_CHECK(!complex, "dtrain backend: ", op,
              " reduces complex tensors with SUM, AVG and PREMUL_SUM only (as pairs of reals)");
  const bool bitwise = out.op == DTRAIN_BAND || out.op == DTRAIN_BOR || out.op == DTRAIN_BXOR;
  TORCH_CHECK(!bitwise || integral, "dtrain backend: ", op,
              " applies BAND, BOR and BXOR to integer and bool tensors, not ", t);
  return out;
}

void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "dtrain backend: ", op, " got an undefined tensor");
  TORCH_CHECK(!t.is_sparse(), "dtrain backend: ", op,
              " got a sparse tensor; the backend moves dense tensors only (use .to_dense())");
  TORCH_CHECK(t.layout() == at::kStrided, "dtrain backend: ", op, " got a tensor of layout ", t.layout(),
              "; the backend moves dense (strided) tensors only");
  TORCH_CHECK(t.device().is_cpu() || (t.is_cuda() && built_with_cuda()), "dtrain backend: ", op, " got a tensor on ",
              t.device(), "; the backend runs ",
              built_with_cuda() ? "CPU and CUDA tensors (move it with .cpu() or .cuda())"
                                : "CPU tensors only in this build (torch without CUDA; move it with .cpu())");
}

at::Device device_of(const std::vector<at::Tensor>& ts, const char* op) {
  if (ts.empty()) return at::Device(at::kCPU);
  const at::Device d = ts[0].device();
  for (const auto& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK(t.device() == d, "dtrain backend: ", op, " got tensors on ", d, " and on ", t.device(),
                "; one op takes tensors of one device");
  }
  return d;
}

void check_tensors(const std::vector<at::Tensor>& ts, const char* op) {
  for (const auto& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK(t.scalar_type() == ts[0].scalar_type(), "dtrain backend: ", op, " got tensors of dtypes ",
                ts[0].scalar_type(), " and ", t.scalar_type(), "; all must have one dtype");
  }
}

void check_single(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "dtrain backend: ", op, " takes exactly one tensor per call, got ", ts.size());
  check_tensor(ts[0], op);
}

size_t total_numel(const std::vector<at::Tensor>& ts) {
  size_t n = 0;
  for (const auto& t : ts) n += static_cast<size_t>(t.numel());
  return n;
}

at::Tensor flatten(const std::vector<at::Tensor>& ts, bool fill) {
  at::Tensor flat = at::empty({static_cast<int64_t>(total_numel(ts))}, ts.at(0).options());
  if (!fill) return flat;
  int64_t off = 0;
  for (const auto& t : ts) {
    flat.narrow(0, off, t.numel()).copy_(t.reshape({-1}));
    off += t.numel();
  }
  return flat;
}

void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t off = 0;
  for (const auto& t : ts) {
    t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
}

}  // namespace dtrain_torch
