// bench_rdzv_join [N...] [--reps R] [--table]
// N agents, each a thread with its own NodeSession (its own TCP connection, token handshake),
// join one rendezvous server on loopback; each then sets one key, reads its neighbour's key (a
// blocking get), enters one store barrier of N and then the exit barrier. The time from releasing all threads to the last one
// leaving the barrier is reported per N (median of R runs), with the growth ratio against the
// previous N and against linear growth from the first N. --table also fetches the full rank table
// on every node (O(n) bytes per node, O(n^2) in total). One warm-up run of the first N is discarded.
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "dtrain/rendezvous/membership/node_session.hpp"
#include "dtrain/rendezvous/server/server.hpp"

using namespace dtrain::rdzv;
using Clock = std::chrono::steady_clock;

namespace {

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard l(mu);
      open = true;
    }
    cv.notify_all();
  }
};

struct Agent {
  int index = 0, n = 0, port = 0;
  bool table = false;
  Gate* gate = nullptr;
  std::string run;
  std::atomic<int>* failures = nullptr;
  std::string* error = nullptr;
  std::mutex* error_mu = nullptr;
};

void* agent_main(void* p) {
  auto* a = static_cast<Agent*>(p);
  a->gate->wait();
  try {
    NodeSessionOptions o;
    o.store.host = "127.0.0.1";
    o.store.port = a->port;
    o.store.token = "bench-token-0123456789abcdef";
    o.store.run_id = a->run;
    o.store.connect_timeout = std::chrono::milliseconds(120000);
    o.host = "agent" + std::to_string(a->index);
    o.node_rank = -1;
    o.slots = 8;
    o.instances = a->n;
    o.spec_hash = "bench";
    o.master_port = 29500;  // skip the free-port probe: every agent proposes one
    o.join_timeout = std::chrono::milliseconds(300000);
    o.heartbeat_timeout = std::chrono::milliseconds(0);
    o.fetch_table = a->table;
    NodeSession s(o);
    JoinResult r = s.join();
    int me = r.self.node_rank;
    auto& store = s.store();
    std::string v = std::to_string(me);
    store.set("addr/" + std::to_string(me), as_bytes(v));
    Bytes peer = store.get("addr/" + std::to_string((me + 1) % a->n), std::chrono::milliseconds(300000));
    if (to_string(peer) != std::to_string((me + 1) % a->n)) throw std::runtime_error("wrong neighbour value");
    store.barrier("done", a->n, std::chrono::milliseconds(300000));
    s.finish(std::chrono::milliseconds(300000));  // exit barrier, so leaving is not a loss
  } catch (const std::exception& e) {
    ++*a->failures;
    std::lock_guard l(*a->error_mu);
    if (a->error->empty()) *a->error = e.what();
  }
  return nullptr;
}

double run_once(Server& server, int n, bool table, int rep) {
  Gate gate;
  std::atomic<int> failures{0};
  std::string error;
  std::mutex error_mu;
  std::vector<Agent> agents(static_cast<std::size_t>(n));
  std::vector<pthread_t> threads(static_cast<std::size_t>(n));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  static int round = 0;
  std::string run = "bench-" + std::to_string(n) + "-" + std::to_string(rep) + "-" + std::to_string(round++);
  for (int i = 0; i < n; ++i) {
    auto& a = agents[std::size_t(i)];
    a = Agent{i, n, server.port(), table, &gate, run, &failures, &error, &error_mu};
    if (pthread_create(&threads[std::size_t(i)], &attr, agent_main, &a) != 0) {
      std::fprintf(stderr, "cannot create thread %d: %s\n", i, std::strerror(errno));
      std::exit(1);
    }
  }
  pthread_attr_destroy(&attr);
  auto t0 = Clock::now();
  gate.release();
  for (auto& t : threads) pthread_join(t, nullptr);
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failures > 0) {
    std::fprintf(stderr, "N=%d: %d agents failed, first: %s\n", n, failures.load(), error.c_str());
    std::exit(1);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ns;
  int reps = 3;
  bool table = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--table") == 0) table = true;
    else ns.push_back(std::atoi(argv[i]));
  }
  if (ns.empty()) ns = {64, 256, 1024, 2048};
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  int need = 2 * *std::max_element(ns.begin(), ns.end()) + 64;
  if (rl.rlim_cur < rlim_t(need)) {
    std::fprintf(stderr, "need %d file descriptors, the hard limit is %llu\n", need,
                 static_cast<unsigned long long>(rl.rlim_max));
    return 1;
  }
  ServerOptions so;
  so.token = "bench-token-0123456789abcdef";
  Server server(so);
  server.start();
  std::printf("rendezvous join scaling: N agents (threads) join, set one key, get a neighbour's, barrier of N, exit barrier\n");
  std::printf("loopback, token auth, %s rank table; median of %d runs\n\n", table ? "with" : "without", reps);
  std::printf("%8s %12s %14s %12s %14s\n", "N", "time (s)", "per agent (us)", "x prev N", "x linear");
  run_once(server, ns.front(), table, -1);  // warm-up, not reported (first allocations, page faults)
  double first = 0, prev = 0;
  int first_n = 0, prev_n = 0;
  for (int n : ns) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) t.push_back(run_once(server, n, table, r));
    std::sort(t.begin(), t.end());
    double med = t[t.size() / 2];
    char prevs[32] = "-", lin[32] = "-";
    if (prev > 0) std::snprintf(prevs, sizeof prevs, "%.2f (N x%.0f)", med / prev, double(n) / prev_n);
    if (first > 0) std::snprintf(lin, sizeof lin, "%.2f", (med / first) / (double(n) / first_n));
    std::printf("%8d %12.4f %14.1f %12s %14s\n", n, med, med / n * 1e6, prevs, lin);
    std::fflush(stdout);
    if (first == 0) {
      first = med;
      first_n = n;
    }
    prev = med;
    prev_n = n;
  }
  server.stop();
  return 0;
}
