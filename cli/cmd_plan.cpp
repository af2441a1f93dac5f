// Placeholder until the plan command lands.
#include <CLI/CLI.hpp>

#include "app.hpp"

namespace dtrain::cli {
void register_plan(CLI::App&, Runner&) {}
}  // namespace dtrain::cli
