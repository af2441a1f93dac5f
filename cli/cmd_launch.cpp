// Placeholder until the launch command lands.
#include <CLI/CLI.hpp>

#include "app.hpp"

namespace dtrain::cli {
void register_launch(CLI::App&, Runner&) {}
}  // namespace dtrain::cli
