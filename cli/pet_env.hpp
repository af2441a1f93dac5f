#pragma once
// torchrun's PET_<FLAG> variables (torch.distributed.argparse_util): each one whose flag the command
// line does not give becomes that flag, unless the job spec sets the field the flag overrides.
// Precedence, field by field: command line > job spec > PET_* > Slurm, SageMaker, torch env >
// defaults (dtrain-launch(1), TORCHRUN FLAGS).
#include <map>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

struct PetUse {
  std::string variable;  // "PET_NPROC_PER_NODE"
  std::string value;     // "3"
  std::string flag;      // "--nproc-per-node"
};

struct PetResult {
  std::vector<std::string> args;   // flags (and values) to put before the command line's own
  std::vector<PetUse> used;        // what was read, for messages
  std::vector<std::string> notes;  // variables not used because the job spec sets their field
};

// `cli` are the options split_program() returned for `sub`; `words` what it found (program, job
// file, --set). Throws ConfigError for a switch variable that is not an integer (PET_STANDALONE=yes).
PetResult pet_arguments(const CLI::App& sub, const std::vector<std::string>& cli, const ProgramWords& words,
                        const std::map<std::string, std::string>& env);

}  // namespace dtrain::cli
