// Placeholder until the status command lands.
#include <CLI/CLI.hpp>

#include "app.hpp"

namespace dtrain::cli {
void register_status(CLI::App&, Runner&) {}
}  // namespace dtrain::cli
