#pragma once
// Helpers of the multi-node tests: `dtrain launch` processes of the real binary on loopback (one
// spec, a tokened store served by node 0's agent), their exit statuses and output.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../agent/agent_test_util.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"

extern char** environ;

namespace mn {

using agent_test::TempDir;
namespace fs = std::filesystem;

inline int free_port() { return dtrain::net::pick_free_port("127.0.0.1"); }

// examples/c_allreduce, built with these tests (C_ALLREDUCE, tests/multinode/CMakeLists.txt).
inline fs::path allreduce_worker() { return C_ALLREDUCE; }

// Until something listens on 127.0.0.1:port.
inline bool listening(int port) {
  return agent_test::wait_until([&] {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return up;
  }, 30);
}

// One `dtrain launch` process with stdout/stderr in files.
struct Node {
  pid_t pid = -1;
  std::string out, err;
  int rc = -2;
};

inline Node start(const TempDir& t, const std::string& name, const std::vector<std::string>& args) {
  Node n;
  n.out = t / (name + ".out");
  n.err = t / (name + ".err");
  std::vector<std::string> argv{DTRAIN_BIN, "launch"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, n.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, n.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int rc = posix_spawn(&n.pid, DTRAIN_BIN, &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  return n;
}

// Waits for the node (killing it at the deadline); its exit status, 128+N for signal N, -1 on timeout.
inline int finish(Node& n, double timeout_s) {
  if (n.rc != -2) return n.rc;
  n.rc = agent_test::wait_child(n.pid, timeout_s);
  if (n.rc == -1) {
    ::kill(n.pid, SIGKILL);
    ::waitpid(n.pid, nullptr, 0);
  }
  return n.rc;
}

inline std::string err_of(const Node& n) { return agent_test::slurp(n.err); }

// KEY=VALUE lines of a worker's env dump.
inline std::map<std::string, std::string> env_file(const fs::path& p) {
  std::map<std::string, std::string> m;
  for (const auto& line : agent_test::lines_of(agent_test::slurp(p))) {
    auto eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

struct Job {
  TempDir t;
  int port = free_port();
  std::string token = dtrain::rdzv::auth::new_token();  // 32 characters
  std::string marker = agent_test::unique_marker();
  std::string job;

  // `script` runs under sh -c in every worker; $T is the temp dir, env-$RANK-$DTRAIN_GENERATION
  // dumps are written before it runs.
  Job(int instances, int procs, const std::string& script, const std::string& extra = "")
      : Job(std::to_string(instances), procs, script, extra) {}
  // `instances`: the JSON of cluster.instances ("3", or "{\"min\": 2, \"max\": 4}")
  Job(const std::string& instances, int procs, const std::string& script, const std::string& extra = "") {
    agent_test::write_file(t / "token", token + "\n");
    fs::permissions(t / "token", fs::perms(0600));
    std::string cmd = "env > \"$T/env-$RANK-$DTRAIN_GENERATION.tmp\" && mv \"$T/env-$RANK-$DTRAIN_GENERATION.tmp\" "
                      "\"$T/env-$RANK-$DTRAIN_GENERATION\"; " + script;
    std::string esc;
    for (char c : cmd) {
      if (c == '"' || c == '\\') esc += '\\';
      esc += c;
    }
    job = t / "job.json";
    agent_test::write_file(job, fmt::format(R"({{"version": 1, "name": "mn", "command": ["sh", "-c", "{}"],
 "cluster": {{"instances": {}, "procs_per_instance": {}}},
 "rendezvous": {{"endpoint": "127.0.0.1:{}", "token_file": "{}", "heartbeat_s": 0.5, "heartbeat_timeout_s": 2,
                 "join_timeout_s": 40}},
 "env": {{"T": "{}", "MN_MARKER": "{}"}}, "grace_s": 2{}}})",
                                            esc, instances, procs, port, t / "token", t.path.string(), marker, extra));
  }
  std::vector<std::string> args(int node, std::vector<std::string> more = {}) const {
    std::vector<std::string> a{job, "--node-rank", std::to_string(node), "--no-progress"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  Node node(int i, std::vector<std::string> more = {}) const { return start(t, fmt::format("node{}", i), args(i, more)); }
  bool have_env(int rank, int gen) const { return fs::exists(t.path / fmt::format("env-{}-{}", rank, gen)); }
  // Until ranks 0..ranks-1 of generation `gen` all wrote their env dumps (60 s at most).
  bool all_env(int ranks, int gen) const {
    return agent_test::wait_until([&] {
      for (int r = 0; r < ranks; ++r)
        if (!have_env(r, gen)) return false;
      return true;
    }, 60);
  }
  bool no_workers_left() const {
    return agent_test::wait_until([&] { return agent_test::procs_with_env("MN_MARKER=" + marker).empty(); }, 20);
  }
};

// An elastic 2:4 job: its instances, the rest of its spec, and its workers' script (generation 0
// proves its collectives, then runs until the job changes; later generations prove theirs and end).
inline constexpr const char* kElastic = R"({"min": 2, "max": 4})";
inline constexpr const char* kElasticExtra = R"(, "batch": {"global": 24}, "restart": {"max_restarts": 2})";
inline std::string elastic_script() {
  return fmt::format("if [ \"$DTRAIN_GENERATION\" = 0 ]; then '{0}' --count 1000 --iters 2 || exit 9; exec sleep 60; fi; "
                     "exec '{0}' --count 1000 --iters 2",
                     allreduce_worker().string());
}

// After node `lost` of an elastic job of three 2-slot nodes is gone: nodes a and b finish, their
// generation 1 is 4 ranks on 2 nodes (the global batch of 24 kept, 6 per replica) whose collectives
// worked, and node a says the job goes on without `lost`.
inline void check_went_on_with_two(const Job& j, Node& a, Node& b, int lost) {
  CHECK_MESSAGE(finish(a, 90) == 0, err_of(a));
  CHECK_MESSAGE(finish(b, 90) == 0, err_of(b));
  std::string out = agent_test::slurp(a.out) + agent_test::slurp(b.out);
  for (int r = 0; r < 4; ++r) CHECK_MESSAGE(out.find(fmt::format("rank {}/4 ok", r)) != std::string::npos, out);
  for (int r = 0; r < 4; ++r) {
    auto e = env_file(j.t.path / fmt::format("env-{}-1", r));
    CAPTURE(r);
    CHECK(e["WORLD_SIZE"] == "4");
    CHECK(e["DTRAIN_NNODES"] == "2");
    CHECK(e["DTRAIN_GLOBAL_BATCH"] == "24");
    CHECK(e["DTRAIN_PER_REPLICA_BATCH"] == "6");
  }
  CHECK_FALSE(j.have_env(4, 1));
  std::string err = err_of(a);
  CHECK_MESSAGE(err.find(fmt::format("node {}", lost)) != std::string::npos, err);
  CHECK_MESSAGE(err.find("the elastic job goes on with the nodes left") != std::string::npos, err);
}

}  // namespace mn
