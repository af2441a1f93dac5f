// A worker for `dtrain launch` that takes part in the NCCL bootstrap exactly as the collectives
// library does: it connects to the rendezvous store from the env contract and runs the unique-id
// exchange (rank 0: real ncclGetUniqueId + publish; others: wait), then records the 128 bytes it
// holds in OUT/gen<G>-rank<R>.hex. Needs no GPU.
//
//   nccl_id_worker OUT [--fail-rank R --fail-generation G] [--root-delay-ms N] [--init]
//
// --fail-rank/--fail-generation: that rank exits 3 after every rank recorded its id (a restart).
// --root-delay-ms: in generations >= 1 rank 0 waits before publishing, so the other ranks are
//                  already waiting for the key (a stale id from generation 0 would show here).
// --init:          after the exchange, build the whole NCCL communicator (device selection,
//                  ncclCommInitRankConfig); prints the error and exits 1 when that fails.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "dtrain/common/net.hpp"
#include "dtrain/rendezvous/store/client.hpp"
#include "nccl_core.hpp"

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) throw dtrain::ConfigError(fmt::format("{} is not set (run me under dtrain launch)", name));
  return v;
}

int env_int(const char* name) { return std::stoi(env(name)); }

}  // namespace

int main(int argc, char** argv) {
  using namespace dtrain;
  using namespace dtrain::coll::nccl;
  if (argc < 2) {
    std::fprintf(stderr, "usage: nccl_id_worker OUT [--fail-rank R --fail-generation G] [--root-delay-ms N] [--init]\n");
    return 2;
  }
  std::string out = argv[1];
  int fail_rank = -1, fail_generation = -1, root_delay_ms = 0;
  bool init = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : -1; };
    if (a == "--fail-rank") fail_rank = next();
    else if (a == "--fail-generation") fail_generation = next();
    else if (a == "--root-delay-ms") root_delay_ms = next();
    else if (a == "--init") init = true;
  }
  try {
    const int rank = env_int("RANK");
    const int size = env_int("WORLD_SIZE");
    const int generation = env_int("DTRAIN_GENERATION");
    auto addr = net::parse_host_port(env("DTRAIN_STORE_ADDR"), "DTRAIN_STORE_ADDR");
    rdzv::ClientOptions co;
    co.host = addr.host;
    co.port = addr.port;
    const char* token = std::getenv("DTRAIN_STORE_TOKEN");
    co.token = token != nullptr ? token : "";
    co.run_id = env("DTRAIN_RUN_ID");
    co.generation = generation;
    co.client_name = fmt::format("nccl_id_worker rank {}", rank);
    auto store = rdzv::connect_store(co);
    const auto timeout = std::chrono::milliseconds(60000);

    if (init) {
      Options o;
      o.rank = rank;
      o.size = size;
      o.local_rank = env_int("LOCAL_RANK");
      o.store = store.get();
      o.timeout = timeout;
      Communicator comm(o);
      std::printf("rank %d: NCCL communicator ready on CUDA device %d\n", rank, comm.device());
      return 0;
    }

    if (rank == 0 && generation >= 1 && root_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(root_delay_ms));
    rdzv::Bytes id = exchange_unique_id(*store, rank, 0, Clock::now() + timeout, new_unique_id);
    std::string text = hex(id);
    {
      std::ofstream f(fmt::format("{}/gen{}-rank{}.hex", out, generation, rank));
      f << text << '\n';
      if (!f) throw IoError("cannot write to " + out);
    }
    std::printf("rank %d generation %d nccl id %s\n", rank, generation, text.substr(0, 32).c_str());
    std::fflush(stdout);
    store->barrier("recorded", size, timeout);
    if (rank == fail_rank && generation == fail_generation) {
      std::fprintf(stderr, "rank %d: failing on purpose in generation %d\n", rank, generation);
      return 3;
    }
    return 0;
  } catch (const coll::nccl::Error& e) {
    std::fprintf(stderr, "nccl_id_worker: %s (status %d)\n", e.what(), static_cast<int>(e.status()));
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_id_worker: %s\n", e.what());
    return 1;
  }
}
