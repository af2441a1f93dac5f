// Groups and point-to-point at the C ABI in real processes through `dtrain launch` (the worker is
// tests/collectives/p2p_worker.c): the tensor, pipeline and data groups of a job with a `parallel`
// section, dtrain_comm_split, and send/recv/sendrecv, on the shared-memory and TCP engines and,
// with two agents on loopback, the hierarchical one; and the refusals: a count mismatch named on
// both sides, a sender SIGKILLed mid-message named by its receiver, a receive that times out naming
// the peer, and a small send that returns before its receiver arrives.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../cli/run_binary.hpp"
#include "launch_env.hpp"
#include "dtrain/common/net.hpp"

namespace {

using dtrain::coll::test::env_for;
using dtrain::test::TempDir;

std::string run_id(const std::string& what) { return "p2p-" + what + "-" + std::to_string(::getpid()); }

// A job of `ranks` ranks per node running `p2p_worker mode`, with an optional parallel section.
std::string job(const std::string& id, int ranks, const std::string& mode, const std::string& parallel = "") {
  std::string j = std::string("{ \"version\": 1, \"name\": \"p2p\", \"command\": [\"") + P2P_WORKER + "\", \"" + mode +
                  "\", \"--ignore-sigterm\"],\n  \"cluster\": { \"procs_per_instance\": " + std::to_string(ranks) +
                  " },\n  \"rendezvous\": { \"run_id\": \"" + id + "\" }";
  if (!parallel.empty()) j += ",\n  \"parallel\": " + parallel;
  return j + " }\n";
}

int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// One node.
// The workers find a folder of their own in P2P_SYNC_DIR.
dtrain::test::Result launch(const std::string& transport, int ranks, const std::string& mode,
                            const std::string& parallel = "") {
  TempDir dir;
  auto spec = dir.write("job.json", job(run_id(mode + transport), ranks, mode, parallel));
  auto env = env_for(transport);
  env["P2P_SYNC_DIR"] = dir.path.string();
  return dtrain::test::run({DTRAIN_BIN, "launch", "--grace", "20", spec}, env, 180);
}

// Two agents on loopback, `per_node` ranks each.
std::string launch_two_nodes(int per_node, const std::string& mode, const std::string& parallel = "") {
  TempDir dir;
  auto spec = dir.write("job.json", job(run_id(mode + "-2n"), per_node, mode, parallel));
  auto token = dir.write("token", "p2p-test-token-0123456789abcdef");
  std::filesystem::permissions(token, std::filesystem::perms(0600));
  const std::string rdzv = "127.0.0.1:" + std::to_string(dtrain::net::pick_free_port("127.0.0.1"));
  dtrain::test::Result res[2];
  std::thread nodes[2];
  for (int nr = 0; nr < 2; ++nr)
    nodes[nr] = std::thread([&, nr] {
      res[nr] = dtrain::test::run({DTRAIN_BIN, "launch", "--nodes", "2", "--node-rank", std::to_string(nr),
                                   "--nproc-per-node", std::to_string(per_node), "--rdzv", rdzv, "--token-file", token,
                                   spec},
                                  env_for("auto"), 180);
    });
  for (auto& t : nodes) t.join();
  std::string all;
  for (auto& r : res) {
    all += r.out + r.err;
    if (r.status != 0) all += "\nEXIT STATUS " + std::to_string(r.status) + "\n";
  }
  return all;
}

}  // namespace

TEST_SUITE("collectives::p2p_launch") {
  TEST_CASE("groups from the environment of a job with a parallel section: shm, TCP, other orders") {
    for (auto [transport, parallel] :
         {std::pair{"auto", R"({ "pipeline": 2, "tensor": 2 })"},
          std::pair{"tcp", R"({ "pipeline": 2, "tensor": 2, "order": "pp-tp-dp" })"},
          std::pair{"auto", R"({ "pipeline": 4, "data": 2, "order": "dp-pp-tp" })"}}) {
      CAPTURE(transport);
      CAPTURE(parallel);
      auto r = launch(transport, 8, "groups", parallel);
      INFO(r.out);
      INFO(r.err);
      CHECK(r.status == 0);
      CHECK(count_of(r.out, " groups ok") == 8);
    }
  }

  TEST_CASE("a worker without the layout, or with one that does not fit the world, is refused by name") {
    auto env = dtrain::test::base_env();
    env["RANK"] = "0";
    env["WORLD_SIZE"] = "4";
    auto r = dtrain::test::run({P2P_WORKER, "groups"}, env, 60);
    CHECK(r.status == 1);
    CHECK(r.err.find("configuration error (2): DTRAIN_PARALLEL_ORDER is not set: dtrain_comm_init_group_from_env "
                     "needs the parallel layout") != std::string::npos);
    for (auto [k, v] : {std::pair{"DTRAIN_PARALLEL_ORDER", "tp-dp-pp"}, std::pair{"DTRAIN_TP_SIZE", "2"},
                        std::pair{"DTRAIN_TP_RANK", "0"}, std::pair{"DTRAIN_PP_SIZE", "1"}, std::pair{"DTRAIN_PP_RANK", "0"},
                        std::pair{"DTRAIN_DP_SIZE", "3"}, std::pair{"DTRAIN_DP_RANK", "0"}})
      env[k] = v;
    r = dtrain::test::run({P2P_WORKER, "groups"}, env, 60);
    CHECK(r.status == 1);
    CHECK(r.err.find("DTRAIN_TP_SIZE=2 x DTRAIN_PP_SIZE=1 x DTRAIN_DP_SIZE=3 is not WORLD_SIZE=4") != std::string::npos);
  }

  TEST_CASE("groups across two agents: hierarchical world, groups on every engine") {
    const std::string all = launch_two_nodes(4, "groups", R"({ "pipeline": 2, "tensor": 2 })");
    INFO(all);
    CHECK(all.find("EXIT STATUS") == std::string::npos);
    CHECK(count_of(all, " groups ok") == 8);
    CHECK(all.find("hierarchical engine") != std::string::npos);  // the world
    CHECK(all.find("tcp engine") != std::string::npos);           // pipeline groups span the nodes
    CHECK(all.find("shm engine") != std::string::npos);           // tensor groups stay on a node
  }

  TEST_CASE("send, recv and sendrecv: every dtype and size on shm and TCP, and across two agents") {
    for (auto [transport, ranks] : {std::pair{"auto", 4}, std::pair{"tcp", 3}}) {
      CAPTURE(transport);
      auto r = launch(transport, ranks, "p2p");
      INFO(r.out);
      INFO(r.err);
      CHECK(r.status == 0);
      CHECK(count_of(r.out, " p2p ok") == ranks);
    }
    const std::string all = launch_two_nodes(2, "p2p");
    INFO(all);
    CHECK(all.find("EXIT STATUS") == std::string::npos);
    CHECK(count_of(all, " p2p ok") == 4);
  }

  TEST_CASE("dtrain_comm_split at the C ABI on shm and TCP, and across two agents") {
    for (auto [transport, ranks] : {std::pair{"auto", 5}, std::pair{"tcp", 4}}) {
      CAPTURE(transport);
      auto r = launch(transport, ranks, "split");
      INFO(r.out);
      INFO(r.err);
      CHECK(r.status == 0);
      CHECK(count_of(r.out, " split ok") == ranks);
    }
    const std::string all = launch_two_nodes(3, "split");
    INFO(all);
    CHECK(all.find("EXIT STATUS") == std::string::npos);
    CHECK(count_of(all, " split ok") == 6);
  }

  TEST_CASE("refusals in real processes: mismatch, a sender killed mid-message, a timeout") {
    for (const char* transport : {"auto", "tcp"}) {
      CAPTURE(transport);
      auto m = launch(transport, 3, "mismatch");
      INFO(m.out, m.err);
      CHECK(m.status == 0);
      CHECK(count_of(m.out, " mismatch ok") == 3);
      CHECK(m.err.find("rank 1: mismatched calls: mismatched point-to-point calls") != std::string::npos);
      CHECK(m.err.find("recv #1 (tag 4, count 999, int32) from rank 0 on rank 1 does not match rank 0's send #1 "
                       "(tag 4, count 1000, int32)") != std::string::npos);

      const auto t0 = std::chrono::steady_clock::now();
      auto d = launch(transport, 2, "die");
      const auto took = std::chrono::steady_clock::now() - t0;
      INFO(d.out, d.err);
      CHECK(d.status == 137);  // the root cause: rank 1's SIGKILL
      CHECK(d.err.find("rank 0: peer failure after") != std::string::npos);
      CHECK(d.err.find("recv #1 (tag 0, count 67108864, uint8) from rank 1 on rank 0: rank 1") != std::string::npos);
      CHECK(count_of(d.out, " die ok") == 1);
      CHECK(took < std::chrono::seconds(19));  // well before the SIGKILL at the end of the grace

      auto t = launch(transport, 2, "timeout");
      INFO(t.out, t.err);
      CHECK(t.status == 0);
      CHECK(t.err.find("rank 0: timeout: recv #1 (tag 2, count 4, float64) from rank 1 timed out after 1 s") !=
            std::string::npos);
    }
  }

  TEST_CASE("a 64 KiB send returns before its receiver arrives (shm and TCP)") {
    for (const char* transport : {"auto", "tcp"}) {
      CAPTURE(transport);
      auto r = launch(transport, 2, "eager");
      INFO(r.out, r.err);
      CHECK(r.status == 0);
      CHECK(count_of(r.out, " eager ok") == 2);
    }
  }
}
