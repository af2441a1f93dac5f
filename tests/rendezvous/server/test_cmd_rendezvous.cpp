// The real binary: `dtrain rendezvous serve` and `dtrain status` against it.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "dtrain/rendezvous/membership/node_session.hpp"
#include "helpers.hpp"
#include "serve_process.hpp"

using namespace rt;
using namespace dtrain::rdzv;
namespace fs = std::filesystem;

namespace {

fs::path write_token(const std::string& name, const std::string& token) {
  fs::path dir = fs::temp_directory_path() / ("dtrain-rdzv-cmd-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path f = dir / name;
  std::ofstream(f) << token << "\n";
  fs::permissions(f, fs::perms::owner_read | fs::perms::owner_write);
  return f;
}

}  // namespace

TEST_SUITE("rendezvous::cmd_rendezvous") {
  TEST_CASE("serve with a token; status shows the joined nodes; wrong token exits 77; SIGTERM exits 0") {
    auto tok = write_token("token", "cmd-test-token-0123456789abcdef");
    auto bad = write_token("bad", "not-the-token-0123456789abcdef");
    ServeProcess serve({"rendezvous", "serve", "--listen", "127.0.0.1:0", "--token-file", tok.string()});
    INFO(serve.first_line);
    REQUIRE(serve.port > 0);
    CHECK(serve.first_line.find("token required") != std::string::npos);

    std::vector<std::unique_ptr<NodeSession>> nodes;
    for (int i = 0; i < 2; ++i) {
      NodeSessionOptions o;
      o.store.host = "127.0.0.1";
      o.store.port = serve.port;
      o.store.token = "cmd-test-token-0123456789abcdef";
      o.store.run_id = "cmdjob";
      o.host = "host" + std::to_string(i);
      o.node_rank = i;
      o.slots = 3;
      o.instances = 2;
      o.spec_hash = "h";
      o.heartbeat_interval = 100ms;
      o.heartbeat_timeout = 5s;
      nodes.push_back(std::make_unique<NodeSession>(o));
    }
    auto f0 = std::async(std::launch::async, [&] { return nodes[0]->join(); });
    auto r1 = nodes[1]->join();
    f0.get();
    for (auto& n : nodes) {
      n->set_local_state("running", 3, 0, 0);
      n->start_monitoring({});
    }
    std::this_thread::sleep_for(300ms);  // a heartbeat carries the state
    std::string ep = "127.0.0.1:" + std::to_string(serve.port);

    auto text = run_dtrain("status --rdzv " + ep + " --token-file " + tok.string());
    INFO(text.out);
    CHECK(text.status == 0);
    CHECK(text.out.find("run cmdjob  generation 0  nodes 2/2  world size 6") != std::string::npos);
    CHECK(text.out.find("host1") != std::string::npos);
    CHECK(text.out.find("running") != std::string::npos);

    auto json = run_dtrain("status --rdzv " + ep + " --token-file " + tok.string() + " --run-id cmdjob --json");
    INFO(json.out);
    CHECK(json.status == 0);
    CHECK(json.out.find("\"run_id\":\"cmdjob\"") != std::string::npos);
    CHECK(json.out.find("\"host\":\"host0\"") != std::string::npos);
    CHECK(json.out.find("\"workers_running\":3") != std::string::npos);
    CHECK(json.out.find("\"root_cause\":null") != std::string::npos);

    auto wrong = run_dtrain("status --rdzv " + ep + " --token-file " + bad.string());
    CHECK(wrong.status == 77);
    CHECK(wrong.out.find("token mismatch") != std::string::npos);
    auto none = run_dtrain("status --rdzv " + ep);
    CHECK(none.status == 77);

    std::vector<std::future<void>> done;
    for (auto& n : nodes) done.push_back(std::async(std::launch::async, [&n] { n->finish(20s); }));
    for (auto& d : done) d.get();
    nodes.clear();
    CHECK(serve.stop(SIGTERM) == 0);
    std::error_code ec;
    fs::remove_all(tok.parent_path(), ec);
  }

  TEST_CASE("refusals at start") {
    auto r = run_dtrain("rendezvous serve --listen 0.0.0.0:0");
    CHECK(r.status == 2);
    CHECK(r.out.find("without a token") != std::string::npos);
    auto e = run_dtrain("rendezvous serve --listen 127.0.0.1:0 --token-file /nonexistent/token");
    CHECK(e.status == 2);
    CHECK(e.out.find("/nonexistent/token") != std::string::npos);
    auto bad = run_dtrain("status --rdzv nonsense");
    CHECK(bad.status == 2);
    auto weak = write_token("weak", "secret1");
    auto w = run_dtrain("rendezvous serve --listen 127.0.0.1:0 --token-file " + weak.string());
    CHECK(w.status == 2);
    CHECK(w.out.find("too weak") != std::string::npos);
    CHECK(w.out.find("dtrain token --output FILE") != std::string::npos);
    auto ws = run_dtrain("status --rdzv 127.0.0.1:1 --token-file " + weak.string());
    CHECK(ws.status == 2);
    std::error_code ec;
    fs::remove_all(weak.parent_path(), ec);
  }

  TEST_CASE("a port in use is a resource error (71) that names the port, nothing left running") {
    ServeProcess first({"rendezvous", "serve", "--listen", "127.0.0.1:0"});
    REQUIRE(first.port > 0);
    auto r = run_dtrain("rendezvous serve --listen 127.0.0.1:" + std::to_string(first.port));
    INFO(r.out);
    CHECK(r.status == 71);
    CHECK(r.out.find("cannot listen on 127.0.0.1:" + std::to_string(first.port)) != std::string::npos);
    CHECK(r.out.find("another process uses that port") != std::string::npos);
    CHECK(first.stop(SIGTERM) == 0);
  }

  TEST_CASE("a tokenless loopback server and SIGINT") {
    ServeProcess serve({"rendezvous", "serve", "--listen", "127.0.0.1:0"});
    REQUIRE(serve.port > 0);
    auto s = run_dtrain("status --rdzv 127.0.0.1:" + std::to_string(serve.port) + " --json");
    CHECK(s.status == 0);
    CHECK(s.out.find("\"runs\":[]") != std::string::npos);
    CHECK(serve.stop(SIGINT) == 0);
  }
}
