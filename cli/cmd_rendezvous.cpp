// Placeholder until the rendezvous command lands.
#include <CLI/CLI.hpp>

#include "app.hpp"

namespace dtrain::cli {
void register_rendezvous(CLI::App&, Runner&) {}
}  // namespace dtrain::cli
