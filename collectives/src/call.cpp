#include "call.hpp"

#include <time.h>

#include <type_traits>

#include <fmt/format.h>

namespace dtrain::coll {

Clock::time_point coarse_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  static_assert(std::is_same_v<Clock, std::chrono::steady_clock>, "steady_clock is CLOCK_MONOTONIC on Linux");
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                       std::chrono::nanoseconds(ts.tv_nsec)));
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::barrier: return "barrier";
    case OpKind::allreduce: return "allreduce";
    case OpKind::broadcast: return "broadcast";
    case OpKind::allgather: return "allgather";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::comm_split: return "comm_split";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
    case OpKind::reduce: return "reduce";
    case OpKind::gather: return "gather";
    case OpKind::scatter: return "scatter";
    case OpKind::alltoall: return "alltoall";
    case OpKind::alltoallv: return "alltoallv";
    case OpKind::recv_any: return "recv_any";
  }
  return "unknown-op";
}

std::size_t dtype_size(dtrain_dtype_t dtype) {
  switch (dtype) {
    case DTRAIN_INT8:
    case DTRAIN_UINT8:
    case DTRAIN_BOOL: return 1;
    case DTRAIN_INT16:
    case DTRAIN_FLOAT16:
    case DTRAIN_BFLOAT16: return 2;
    case DTRAIN_INT32:
    case DTRAIN_FLOAT32: return 4;
    case DTRAIN_INT64:
    case DTRAIN_FLOAT64: return 8;
  }
  return 0;
}

bool valid_dtype(int dtype) { return dtype >= DTRAIN_INT8 && dtype <= DTRAIN_INT16; }
bool valid_redop(int op) { return op >= DTRAIN_SUM && op <= DTRAIN_BXOR; }
bool is_floating(dtrain_dtype_t dtype) {
  return dtype == DTRAIN_FLOAT16 || dtype == DTRAIN_BFLOAT16 || dtype == DTRAIN_FLOAT32 || dtype == DTRAIN_FLOAT64;
}
bool is_bitwise(dtrain_op_t op) { return op == DTRAIN_BAND || op == DTRAIN_BOR || op == DTRAIN_BXOR; }

namespace {
std::string describe(OpKind kind, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root) {
  switch (kind) {
    case OpKind::barrier: return "barrier";
    case OpKind::allreduce:
      return fmt::format("allreduce(count {}, {}, {})", count, dtype_name(dtype), op_name(op));
    case OpKind::reduce_scatter:
      return fmt::format("reduce_scatter(recvcount {}, {}, {})", count, dtype_name(dtype), op_name(op));
    case OpKind::broadcast: return fmt::format("broadcast(count {}, {}, root {})", count, dtype_name(dtype), root);
    case OpKind::allgather: return fmt::format("allgather(sendcount {}, {})", count, dtype_name(dtype));
    case OpKind::comm_split: return "comm_split";
    case OpKind::send:
    case OpKind::recv:
    case OpKind::recv_any: return fmt::format("{}(count {}, {})", op_kind_name(kind), count, dtype_name(dtype));
    case OpKind::reduce:
      return fmt::format("reduce(count {}, {}, {}, root {})", count, dtype_name(dtype), op_name(op), root);
    case OpKind::gather: return fmt::format("gather(sendcount {}, {}, root {})", count, dtype_name(dtype), root);
    case OpKind::scatter: return fmt::format("scatter(recvcount {}, {}, root {})", count, dtype_name(dtype), root);
    case OpKind::alltoall: return fmt::format("alltoall(count {}, {})", count, dtype_name(dtype));
    case OpKind::alltoallv: return fmt::format("alltoallv({})", dtype_name(dtype));
  }
  return "unknown";
}
}  // namespace

std::size_t P2pDesc::bytes() const { return device ? 0 : count * dtype_size(dtype); }

std::string P2pDesc::text() const { return describe_p2p(seq, fp0(), fp1()); }

std::string describe_p2p(std::uint64_t seq, std::uint64_t fp0, std::uint64_t fp1) {
  const auto dtype = static_cast<dtrain_dtype_t>(fp1 & 0xff);
  const bool device = ((fp1 >> 8) & 0xff) != 0;
  const auto tag = static_cast<int>(static_cast<std::uint32_t>(fp1 >> 32));
  if (tag < 0) {  // a collective's message (coll_tag)
    const int v = -1 - tag;
    return fmt::format("#{} ({} root {} part, count {}, {})", seq, op_kind_name(static_cast<OpKind>(v % 256)), v / 256,
                       fp0, dtype_name(dtype));
  }
  return fmt::format("#{} (tag {}, count {}, {}{})", seq, tag, fp0, dtype_name(dtype), device ? ", device buffer" : "");
}

std::string OpDesc::text() const {
  return fmt::format("{} #{}", describe(kind, count, dtype, premul ? DTRAIN_PREMUL_SUM : op, root), seq);
}

std::string describe_fingerprint(std::uint64_t fp0, std::uint64_t fp1) {
  auto kind = static_cast<OpKind>(fp1 & 0xff);
  auto dtype = static_cast<dtrain_dtype_t>((fp1 >> 8) & 0xff);
  auto op = static_cast<dtrain_op_t>((fp1 >> 16) & 0xff);
  auto root = static_cast<int>(static_cast<std::uint32_t>(fp1 >> 32));
  return describe(kind, fp0, dtype, op, root);
}

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0 && ms.count() < 1'000'000'000LL) return fmt::format("{} s", ms.count() / 1000);
  return fmt::format("{:.3g} s", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace dtrain::coll
