#pragma once
// The dtrain command line: one file per subcommand, each with a register_<name>() that adds its
// CLI11 subcommand and sets `run` to the function that carries it out when it is chosen.
#include <functional>

#include "command_line.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

using Runner = std::function<int()>;

// plan and launch take a program after their options (command_line.hpp): `words` is filled before
// CLI11 parses the rest.
void register_plan(CLI::App& app, Runner& run, const ProgramWords& words);
void register_launch(CLI::App& app, Runner& run, const ProgramWords& words);
void register_rendezvous(CLI::App& app, Runner& run);
void register_status(CLI::App& app, Runner& run);
void register_token(CLI::App& app, Runner& run);

// Parses argv, runs the chosen subcommand, and maps errors to the exit statuses of man/dtrain.1.
int run(int argc, char** argv);

}  // namespace dtrain::cli
