#pragma once
// Every flag of `dtrain plan` and `dtrain launch`, one row each: torchrun's flags (PyTorch 1.13 and
// 2.x), mpirun's words and dtrain's own. From the rows the command line builds its options and
// --help, the PET_<FLAG> variables are read, and each value reaches its target through one setter:
// a spec field (set as --set sets it, checked by the field's rule in fields.cpp) or a launch
// setting (checked by its rule in launch_settings.cpp). Adding a flag is one row here plus its
// target's rule.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::config {

namespace detail {
struct FlagSink;
}

enum class FlagKind {
  value,     // --max-restarts 3; given twice, the last value counts (as argparse)
  toggle,    // --standalone: sets its target to `toggle_value`
  repeated,  // --set A --set B: every value counts
};

// Whose word it is: an unambiguous prefix of a torchrun long flag is taken as the flag (argparse).
enum class FlagFamily { torchrun, mpirun, dtrain };

struct FlagRow;
// How a flag's text becomes values (nullptr: by the type of the target's rule).
using FlagReader = void (*)(const FlagRow& row, const std::string& text, detail::FlagSink& sink);

struct FlagRow {
  const char* names;      // CLI11's form, short before long: "-r,--redirects", "--nnodes,--nodes"
  const char* pet;        // torchrun's variable ("PET_NNODES"), or nullptr
  FlagKind kind;
  const char* target;     // a spec field ("/restart/max_restarts") or a launch setting ("role")
  const char* type_name;  // the value's name in --help ("N"; "" for a toggle)
  const char* help;
  FlagFamily family;
  FlagReader read = nullptr;
  const char* toggle_value = "true";  // a toggle's value, as JSON
};

std::span<const FlagRow> flag_rows();
// The row one of whose names is `name` ("--nproc-per-node", "--nproc_per_node", "-r"), or nullptr.
const FlagRow* find_flag(std::string_view name);
// How messages name the row: its first long name ("--nproc-per-node"), else its short one; an
// mpirun word its first name ("-n", "-H").
std::string flag_name(const FlagRow& row);
// Every name of the row: {"-r", "--redirects"}.
std::vector<std::string> flag_names(const FlagRow& row);
// The spec fields a row's value overrides (its PET_ variable yields to a job spec that sets one).
std::vector<std::string> overridden_fields(const FlagRow& row);

}  // namespace dtrain::config
