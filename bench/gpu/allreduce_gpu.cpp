// GPU allreduce through dtrain next to a raw NCCL loop in the same process and on the same buffers
// and stream. Runs as a worker of `dtrain launch` (one rank per GPU):
//
//   dtrain_gpu_allreduce [--min-bytes 8] [--max-bytes 1073741824] [--factor 4] [--reps 5]
//                        [--budget-ms 20] [--out FILE.md]
//
// For each size (float32 sum): checks dtrain's result (synchronous call, and on a user stream)
// against a host reference, then times four loops, each the median of --reps repetitions:
//   raw:         ncclAllReduce on the stream, back to back, one cudaStreamSynchronize at the end
//   dtrain:      dtrain_allreduce(..., stream) the same way
//   raw sync:    ncclAllReduce + cudaStreamSynchronize per call
//   dtrain sync: dtrain_allreduce(..., NULL), which returns when the result is there
// busbw = algbw x 2(n-1)/n as nccl-tests; ratio = dtrain bandwidth / raw bandwidth.
// Rank 0 prints the table (and writes it to --out as Markdown). Exit 0 when every check passed.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dtrain/collectives.h"

cudaError_t dtrain_bench_fill(float* p, std::size_t n, int rank, cudaStream_t stream);

namespace {

using Clock = std::chrono::steady_clock;

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(dtrain_status_t s, const char* what) {
  if (s != DTRAIN_SUCCESS)
    throw Failure(fmt::format("{}: {} ({})", what, dtrain_status_string(s), dtrain_last_error()));
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure(fmt::format("{}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Failure(fmt::format("{}: {} ({})", what, ncclGetErrorString(r), ncclGetLastError(nullptr)));
}

struct Args {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{1} << 30;
  std::size_t factor = 4;
  int reps = 5;
  double budget_ms = 20;
  std::string out;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) throw Failure("missing value after " + k);
    std::string v = argv[++i];
    if (k == "--min-bytes") a.min_bytes = std::stoull(v);
    else if (k == "--max-bytes") a.max_bytes = std::stoull(v);
    else if (k == "--factor") a.factor = std::stoull(v);
    else if (k == "--reps") a.reps = std::stoi(v);
    else if (k == "--budget-ms") a.budget_ms = std::stod(v);
    else if (k == "--out") a.out = v;
    else throw Failure("unknown option " + k);
  }
  if (a.min_bytes < 4 || a.max_bytes < a.min_bytes || a.factor < 2 || a.reps < 1)
    throw Failure("bad sizes: need 4 <= --min-bytes <= --max-bytes, --factor >= 2, --reps >= 1");
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of `iters` calls of op, synchronising once at the end.
double time_loop(int iters, cudaStream_t s, const std::function<void()>& op) {
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) op();
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : dflt;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = 0;
  try {
    Args args = parse(argc, argv);
    dtrain_comm_t comm = nullptr;
    check(dtrain_comm_init_from_env(&comm), "dtrain_comm_init_from_env");
    int size = 1;
    check(dtrain_comm_rank(comm, &rank), "dtrain_comm_rank");
    check(dtrain_comm_size(comm, &size), "dtrain_comm_size");

    // What a training script does: pick its GPU first.
    int ndev = 0;
    check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
    const int device = env_int("LOCAL_RANK", 0) % ndev;
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");

    // The raw peer: its own NCCL communicator, id passed over dtrain's CPU engine.
    ncclUniqueId id{};
    if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    check(dtrain_broadcast(comm, &id, &id, sizeof id, DTRAIN_UINT8, 0, nullptr), "dtrain_broadcast(id)");
    ncclComm_t raw = nullptr;
    check(ncclCommInitRank(&raw, size, id, rank), "ncclCommInitRank");

    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    const std::size_t max_count = args.max_bytes / sizeof(float);
    float* send = nullptr;
    float* recv = nullptr;
    check(cudaMalloc(&send, max_count * sizeof(float)), "cudaMalloc(send)");
    check(cudaMalloc(&recv, max_count * sizeof(float)), "cudaMalloc(recv)");
    std::vector<float> host(max_count);

    std::vector<std::size_t> sizes;
    for (std::size_t b = args.min_bytes; b <= args.max_bytes; b *= args.factor) {
      sizes.push_back(b);
      if (b > args.max_bytes / args.factor) break;
    }
    if (sizes.back() != args.max_bytes) sizes.push_back(args.max_bytes);

    int nccl_version = 0;
    ncclGetVersion(&nccl_version);
    int cuda_runtime = 0;
    cudaRuntimeGetVersion(&cuda_runtime);
    const double bus = size > 1 ? 2.0 * (size - 1) / size : 1.0;
    std::vector<std::string> lines;
    lines.push_back(fmt::format("dtrain GPU allreduce, float32 sum, {} rank(s); GPU {} ({}, sm_{}{}); NCCL {}; CUDA runtime {}.{}",
                                size, device, prop.name, prop.major, prop.minor, nccl_version,
                                cuda_runtime / 1000, cuda_runtime % 1000 / 10));
    lines.push_back(size > 1 ? "GB/s columns are busbw = algbw x 2(n-1)/n (nccl-tests)"
                             : "one rank: busbw = algbw x 2(n-1)/n is 0, so the GB/s columns are algbw");
    lines.push_back("ratio = dtrain / raw bandwidth (1.00 = no overhead); sync = one blocking call at a time");
    lines.push_back("");
    lines.push_back("|      bytes |   raw us | dtrain us | raw GB/s | dtrain GB/s | ratio | sync raw us | sync dtrain us | sync ratio | check |");
    lines.push_back("|-----------:|---------:|----------:|---------:|------------:|------:|------------:|---------------:|-----------:|:-----:|");
    bool all_ok = true;
    double worst_large = 0, worst_huge = 0, worst_any = 0;

    for (std::size_t bytes : sizes) {
      const std::size_t count = bytes / sizeof(float);
      // ---- correctness against a host reference ----
      check(dtrain_bench_fill(send, count, rank, s), "fill");
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      bool ok = true;
      for (int mode = 0; mode < 2 && ok; ++mode) {
        check(cudaMemset(recv, 0xff, bytes), "cudaMemset");
        if (mode == 0) {
          check(dtrain_allreduce(comm, send, recv, count, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr), "dtrain_allreduce(sync)");
        } else {
          check(dtrain_allreduce(comm, send, recv, count, DTRAIN_FLOAT32, DTRAIN_SUM, s), "dtrain_allreduce(stream)");
          check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        }
        check(cudaMemcpy(host.data(), recv, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (std::size_t i = 0; i < count; ++i) {
          std::size_t expect = 0;
          for (int r = 0; r < size; ++r) expect += (i * 7 + static_cast<std::size_t>(r) * 13) % 97;
          if (host[i] != static_cast<float>(expect)) {
            std::fprintf(stderr, "rank %d: %zu bytes (%s): element %zu is %g, expected %zu\n", rank, bytes,
                         mode == 0 ? "sync" : "stream", i, static_cast<double>(host[i]), expect);
            ok = false;
            break;
          }
        }
      }
      all_ok = all_ok && ok;

      // ---- timing ----
      auto raw_op = [&] { check(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, raw, s), "ncclAllReduce"); };
      auto dtrain_op = [&] {
        check(dtrain_allreduce(comm, send, recv, count, DTRAIN_FLOAT32, DTRAIN_SUM, s), "dtrain_allreduce");
      };
      auto raw_sync = [&] {
        raw_op();
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      };
      auto dtrain_sync = [&] {
        check(dtrain_allreduce(comm, send, recv, count, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr), "dtrain_allreduce");
      };
      double probe = time_loop(3, s, raw_op);
      int iters = static_cast<int>(std::clamp(args.budget_ms * 1e-3 / std::max(probe, 1e-7), 3.0, 2000.0));
      // Every rank must run the same number of calls: rank 0's choice.
      check(dtrain_broadcast(comm, &iters, &iters, 1, DTRAIN_INT32, 0, nullptr), "dtrain_broadcast(iters)");
      std::vector<double> t_raw, t_dtrain, t_raw_sync, t_dtrain_sync;
      for (int rep = 0; rep < args.reps; ++rep) {
        t_raw.push_back(time_loop(iters, s, raw_op));
        t_dtrain.push_back(time_loop(iters, s, dtrain_op));
        t_raw_sync.push_back(time_loop(iters, s, raw_sync));
        t_dtrain_sync.push_back(time_loop(iters, s, dtrain_sync));
      }
      const double raw_t = median(t_raw), dt_t = median(t_dtrain);
      const double raw_st = median(t_raw_sync), dt_st = median(t_dtrain_sync);
      const double raw_bw = static_cast<double>(bytes) / raw_t / 1e9 * bus;
      const double dt_bw = static_cast<double>(bytes) / dt_t / 1e9 * bus;
      const double ratio = raw_t / dt_t, sync_ratio = raw_st / dt_st;
      const double overhead = 1.0 / ratio - 1.0;
      worst_any = std::max(worst_any, overhead);
      if (bytes >= (std::size_t{1} << 20)) worst_large = std::max(worst_large, overhead);
      if (bytes >= (std::size_t{1} << 26)) worst_huge = std::max(worst_huge, overhead);
      lines.push_back(fmt::format("| {:>10} | {:>8.2f} | {:>9.2f} | {:>8.2f} | {:>11.2f} | {:>5.3f} | {:>11.2f} | {:>14.2f} | {:>10.3f} | {:^5} |",
                                  bytes, raw_t * 1e6, dt_t * 1e6, raw_bw, dt_bw, ratio, raw_st * 1e6, dt_st * 1e6,
                                  sync_ratio, ok ? "ok" : "FAIL"));
      if (rank == 0) {
        std::fprintf(stderr, "%s\n", lines.back().c_str());  // progress, as it goes
        std::fflush(stderr);
      }
    }
    lines.push_back("");
    lines.push_back(fmt::format("dtrain overhead on a stream (1/ratio - 1), worst: {:.2f}% at >= 64 MiB, {:.2f}% at >= 1 MiB, "
                                "{:.2f}% over all sizes; goal < 2% at >= 1 MiB: {}",
                                worst_huge * 100, worst_large * 100, worst_any * 100,
                                worst_large < 0.02 ? "met" : "MISSED"));
    lines.push_back(fmt::format("results vs host reference: {}", all_ok ? "all correct" : "MISMATCH (see stderr)"));

    if (rank == 0) {
      std::string table;
      for (const auto& l : lines) table += l + "\n";
      std::fputs(table.c_str(), stdout);
      if (!args.out.empty()) {
        std::FILE* f = std::fopen(args.out.c_str(), "w");
        if (f == nullptr) throw Failure("cannot write " + args.out);
        std::fputs(table.c_str(), f);
        std::fclose(f);
      }
    }
    check(dtrain_barrier(comm), "dtrain_barrier");
    cudaFree(send);
    cudaFree(recv);
    cudaStreamDestroy(s);
    ncclCommDestroy(raw);
    check(dtrain_comm_destroy(comm), "dtrain_comm_destroy");
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain_gpu_allreduce (rank %d): %s\n", rank, e.what());
    return 1;
  }
}
