#pragma once
// The command lines of `dtrain launch` and `dtrain plan`, torchrun's way: options first, then the
// program and its arguments, which belong to the program and are never parsed here.
//
//   dtrain launch [OPTIONS] [JOB.json] [OPTIONS] [-- ARGS...]     a job file (ARGS: appended to its command)
//   dtrain launch [OPTIONS] SCRIPT.py|MODULE|PROG [ARGS...]       a program (program.hpp)
//   dtrain launch [OPTIONS] -- PROG [ARGS...]                     a program run as it is
//
// split_program() runs before CLI11 sees argv: it accepts torchrun's underscore spellings of long
// options (--nproc_per_node) and, as torchrun's argparse does, an unambiguous beginning of one of
// torchrun's long flags (--nproc_per_nod, with a note; dtrain's own flags are matched exactly),
// mpirun's one-dash words (-np, -ppn), answers an unknown option with a did-you-mean (never blaming
// a job file), and takes the words from the program on out of argv.
#include <optional>
#include <string>
#include <vector>

#include "dtrain/config/flags.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

struct ProgramWords {
  std::vector<std::string> words;     // the program and its arguments ("" when none was given)
  bool after_dashdash = false;        // given as `-- PROG ARGS`: a program run as it is
  std::vector<std::string> appended;  // `JOB.json -- ARGS`: appended to the job's command
};

// The names of a flag row that CLI11 takes ("-n", "--npernode"): mpirun's words of one dash and
// several letters (-np, -ppn) are not among them; split_program() turns them into the row's first
// CLI11 name.
std::string cli11_names(const config::FlagRow& row);

// `args` are the words after the subcommand's name. Returns those CLI11 must parse (options with
// dashes, JOB.json) and fills `out`. Throws ConfigError for an unknown option.
std::vector<std::string> split_program(const CLI::App& sub, const std::vector<std::string>& args, ProgramWords& out);

// A name close to `word` (a misspelling, a swapped pair of letters, a unique prefix), or nullopt.
std::optional<std::string> suggest(const std::string& word, const std::vector<std::string>& names);

}  // namespace dtrain::cli
