#include "app.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"

namespace dtrain::cli {

int run(int argc, char** argv) {
  CLI::App app{"dtrain: launch and supervise distributed training jobs", "dtrain"};
  app.set_version_flag("--version", "dtrain " DTRAIN_VERSION);
  app.require_subcommand(1);
  Runner runner;
  register_plan(app, runner);
  register_launch(app, runner);
  register_rendezvous(app, runner);
  register_status(app, runner);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : exit_code::usage;
  }
  try {
    return runner ? runner() : exit_code::usage;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    return exit_code::usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    return exit_code::internal;
  }
}

}  // namespace dtrain::cli
