// dtrain rendezvous serve --listen ADDR:PORT [--token-file F] [--insecure] [--run-id ID]:
// a dedicated rendezvous store host; runs until SIGINT or SIGTERM.
#include <CLI/CLI.hpp>

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>

#include "app.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/server/server.hpp"

namespace dtrain::cli {
namespace {

struct ServeArgs {
  std::string listen = "127.0.0.1:29400";
  std::string token_file;
  bool insecure = false;
  std::string run_id;
};

int serve(const ServeArgs& a) {
  // Port 0 (a free port) is valid here, unlike for addresses we connect to.
  bool any_port = a.listen.size() > 2 && a.listen.compare(a.listen.size() - 2, 2, ":0") == 0;
  auto hp = net::parse_host_port(any_port ? a.listen.substr(0, a.listen.size() - 1) + "1" : a.listen, "--listen");
  if (any_port) hp.port = 0;
  rdzv::ServerOptions o;
  o.host = hp.host;
  o.port = hp.port;
  o.insecure = a.insecure;
  o.run_id = a.run_id;
  o.token = rdzv::auth::resolve_token(a.token_file);
  // Block the stop signals before the loop thread exists, so they reach only sigwait() below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  rdzv::Server server(o);
  server.start();
  std::printf("dtrain: rendezvous serving on %s (%s)\n", server.endpoint().c_str(),
              o.token.empty() ? "no token, loopback only" : "token required");
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "dtrain: rendezvous stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();
  return exit_code::ok;
}

}  // namespace

void register_rendezvous(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* rdzv = app.add_subcommand("rendezvous", "rendezvous store for multi-node jobs");
  rdzv->require_subcommand(1);
  CLI::App* sub = rdzv->add_subcommand("serve", "serve the rendezvous store until SIGINT or SIGTERM");
  sub->add_option("--listen", args->listen, "ADDR:PORT to bind, exactly as given (port 0: a free port)")
      ->capture_default_str();
  sub->add_option("--token-file", args->token_file,
                  "file whose first line is the shared token (default: DTRAIN_RDZV_TOKEN)");
  sub->add_flag("--insecure", args->insecure, "allow serving without a token on a non-loopback address");
  sub->add_option("--run-id", args->run_id, "accept only clients of this run id (default: any)");
  sub->callback([args, &run] {
    run = [args] { return serve(*args); };
  });
}

}  // namespace dtrain::cli
