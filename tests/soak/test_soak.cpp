// Soak: one `dtrain launch` through 100 consecutive restarts of a 4-worker job, and 1,000 store
// clients connecting and leaving a `dtrain rendezvous serve`. The open descriptors and resident
// memory of the agent and of the server are measured as they go and must stay flat (a generous
// bound); no zombie is left, nothing of the job survives, no run folder is left in the temp dir.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/run_binary.hpp"
#include "../rendezvous/server/serve_process.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/store/client.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using dtrain::test::TempDir;

namespace {

// Under AddressSanitizer freed memory sits in a quarantine (256 MiB by default) before it is
// reused, which reads as growth: keep it small in the processes measured, and allow for it.
#if defined(__SANITIZE_ADDRESS__)
constexpr long kSanitizerSlackKib = 48 * 1024;
#else
constexpr long kSanitizerSlackKib = 0;
#endif

std::string small_quarantine() {
  const char* cur = std::getenv("ASAN_OPTIONS");
  return std::string(cur != nullptr ? cur : "") + ":quarantine_size_mb=8:thread_local_quarantine_size_kb=256";
}

struct Sample {
  long fds = 0, rss_kib = 0, zombies = 0;
};

// "GEN FDS RSS ZOMBIES" lines the workers wrote about their agent ($PPID).
std::map<int, Sample> read_samples(const fs::path& p) {
  std::map<int, Sample> out;
  std::ifstream in(p);
  int gen;
  Sample s;
  while (in >> gen >> s.fds >> s.rss_kib >> s.zombies) out[gen] = s;
  return out;
}

// The median descriptor count of generations [from, to): one sample is taken while the agent is
// still spawning the generation's other workers and closing the previous one's pipes, so a single
// sample can sit a few above or below the agent's settled count (more so under a sanitizer).
long median_fds(const std::map<int, Sample>& samples, int from, int to) {
  std::vector<long> v;
  for (int g = from; g < to; ++g) v.push_back(samples.at(g).fds);
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Processes still alive whose environment holds `needle`.
int procs_with(const std::string& needle) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "environ");
    std::string env{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (env.find(needle) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace

TEST_SUITE("soak") {
  TEST_CASE("100 consecutive restarts of a 4-worker job in one launch: the agent stays flat") {
    TempDir t;
    fs::create_directories(t.path / "tmp");
    std::string marker = "dtrain_soak_" + std::to_string(::getpid());
    // Rank 0 records its agent's descriptors, memory and zombie children, then fails, until the
    // last generation, where every rank succeeds; the others wait to be stopped.
    std::string script =
        "if [ \"$RANK\" = 0 ]; then "
        "  z=0; for s in /proc/[0-9]*/stat; do read -r p c st pp rest < \"$s\" 2>/dev/null || continue; "
        "    [ \"$pp\" = \"$PPID\" ] && [ \"$st\" = Z ] && z=$((z+1)); done; "
        "  echo \"$DTRAIN_GENERATION $(ls /proc/$PPID/fd | wc -l) $(awk '/VmRSS/{print $2}' /proc/$PPID/status) $z\" >> \"$OUT\"; "
        "  [ \"$DTRAIN_GENERATION\" -lt 100 ] && exit 1; exit 0; "
        "fi; "
        "[ \"$DTRAIN_GENERATION\" -lt 100 ] && exec sleep 30; exit 0";
    std::string esc;
    for (char c : script) {
      if (c == '"' || c == '\\') esc += '\\';
      esc += c;
    }
    std::string spec = R"({"command": ["sh", "-c", ")" + esc + R"("], "cluster": {"procs_per_instance": 4},
                           "restart": {"max_restarts": 100}, "grace_s": 5, "env": {"SOAK": ")" + marker + R"(", "OUT": ")" + (t.path / "soak.txt").string() + R"("}})";
    std::string job = t.write("job.json", spec);
    auto env = dtrain::test::base_env();
    env["TMPDIR"] = (t.path / "tmp").string();
    env["ASAN_OPTIONS"] = small_quarantine();
    auto t0 = std::chrono::steady_clock::now();
    auto r = dtrain::test::run({DTRAIN_BIN, "launch", job, "--no-tag"}, env, 600);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK_MESSAGE(r.status == 0, r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    auto samples = read_samples(t.path / "soak.txt");
    REQUIRE(samples.size() == 101);
    const Sample& early = samples.at(5);  // after the first generations warmed everything up
    long max_fds = 0, max_rss = 0, max_zombies = 0;
    for (const auto& [g, s] : samples) {
      if (g < 5) continue;
      max_fds = std::max(max_fds, s.fds);
      max_rss = std::max(max_rss, s.rss_kib);
      max_zombies = std::max(max_zombies, s.zombies);
    }
    const Sample& last = samples.at(100);
    const long early_fds = median_fds(samples, 5, 15), late_fds = median_fds(samples, 91, 101);
    MESSAGE("101 generations (100 restarts) of 4 workers in " << secs << " s; agent fds " << samples.at(0).fds
                                                              << " at g0, median " << early_fds << " over g5-14, median "
                                                              << late_fds << " over g91-100 (max " << max_fds
                                                              << "); RSS " << samples.at(0).rss_kib / 1024 << " / "
                                                              << early.rss_kib / 1024 << " / " << last.rss_kib / 1024
                                                              << " MiB (max " << max_rss / 1024
                                                              << "); zombie children at most " << max_zombies);
    // no descriptor leaks across generations: the settled count does not grow (one descriptor
    // leaked per generation would be ~86 more), and no sample holds more than one extra
    // generation's worker pipes
    CHECK(late_fds <= early_fds + 2);
    CHECK(max_fds <= early_fds + 8);
    CHECK(max_rss <= early.rss_kib + 16384 + kSanitizerSlackKib);  // +16 MiB over 95 generations: generous
    CHECK(max_zombies <= 4);                  // at most the previous generation's, being reaped
    CHECK(procs_with(marker) == 0);
    // the temporary run folder is gone; what stays is the empty registry `dtrain status` reads
    for (const auto& e : fs::recursive_directory_iterator(t.path / "tmp")) {
      CAPTURE(e.path());
      CHECK(e.is_directory());
    }
  }

  TEST_CASE("1,000 store clients connecting and leaving: the server stays flat") {
    TempDir t;
    std::string token = dtrain::rdzv::auth::new_token();
    std::string token_file = t.write("token", token + "\n");
    fs::permissions(token_file, fs::perms::owner_read | fs::perms::owner_write);
    ::setenv("ASAN_OPTIONS", small_quarantine().c_str(), 1);  // for the server (read at its start only)
    rt::ServeProcess serve({"rendezvous", "serve", "--listen", "127.0.0.1:0", "--token-file", token_file},
                           (t.path / "serve.err").string());
    REQUIRE(serve.port > 0);
    dtrain::rdzv::ClientOptions co;
    co.host = "127.0.0.1";
    co.port = serve.port;
    co.token = token;
    co.connect_timeout = 10s;
    auto client = [&](int i) {
      co.run_id = "soak" + std::to_string(i % 7);
      co.generation = i % 3;
      co.client_name = "client " + std::to_string(i);
      auto s = dtrain::rdzv::connect_store(co);
      std::string key = "k" + std::to_string(i % 50);
      s->set(key, dtrain::rdzv::Bytes(1000, std::uint8_t(i)));
      CHECK(s->get(key, 1s).size() == 1000);
      s->add("counter", 1);
      if (i % 10 == 0) {  // now and then a whole one-node job: join, leave
        dtrain::rdzv::NodeSessionOptions o;
        o.store = co;
        o.store.run_id = "job" + std::to_string(i);
        o.host = "h";
        o.instances = 1;
        o.spec_hash = "x";
        o.heartbeat_timeout = 0ms;
        dtrain::rdzv::NodeSession n(o);
        n.join();
        n.finish(5s);
      }
    };
    for (int i = 0; i < 100; ++i) client(i);  // warm up: every scope and allocator arena in use
    long rss0 = rt::rss_kib(serve.pid);
    int fds0 = rt::fd_count(serve.pid);
    long rss_max = rss0;
    int fds_max = fds0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 100; i < 1100; ++i) {
      client(i);
      if (i % 50 == 0) {
        rss_max = std::max(rss_max, rt::rss_kib(serve.pid));
        fds_max = std::max(fds_max, rt::fd_count(serve.pid));
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::this_thread::sleep_for(200ms);
    long rss1 = rt::rss_kib(serve.pid);
    int fds1 = rt::fd_count(serve.pid);
    MESSAGE("1,000 clients (100 of them one-node jobs) in " << secs << " s; server fds " << fds0 << " -> max " << fds_max
                                                            << " -> " << fds1 << "; RSS " << rss0 / 1024 << " -> max "
                                                            << rss_max / 1024 << " -> " << rss1 / 1024 << " MiB");
    CHECK(fds1 <= fds0);
    CHECK(fds_max <= fds0 + 4);
    // +8 MiB: generous (the plain store keys of 7 runs x 3 generations stay)
    CHECK(rss1 <= rss0 + 8192 + kSanitizerSlackKib);
    auto runs = dtrain::rdzv::list_runs(co);
    CHECK(runs.empty());  // the finished one-node jobs are forgotten
    CHECK(serve.stop(SIGTERM) == 0);
    std::ifstream err(t.path / "serve.err");
    std::string text{std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>()};
    CHECK(text.find("dropped") == std::string::npos);  // well-behaved clients are never dropped
  }
}
