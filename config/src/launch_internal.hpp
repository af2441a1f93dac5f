#pragma once
// The parts of a launch's resolution shared inside dtrain_config: the state the flags fill, the one
// setter every flag value goes through (FlagSink), the launch settings' rules, --rdzv-conf's keys
// and torchrun's PET_ variables.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtrain/config/fields.hpp"
#include "dtrain/config/flags.hpp"
#include "dtrain/config/launch.hpp"

namespace dtrain::config::detail {

// A launch while its flags are applied.
struct LaunchState {
  Overrides ov;
  LaunchSettings settings;
  std::string spec_file;                 // --spec
  bool module = false, no_python = false, run_path = false;  // the program's shape
  std::optional<std::string> python;     // --python
  std::string ranks, local_ranks_filter;  // checked against the plan
  bool redirects_set = false;
  StreamChoice tee;
  std::vector<SpecProblem> problems;
  std::vector<std::string> notes;
  std::string applying;  // the flag and value being applied, as messages name them ("-H a:4,b:4")
  // target -> the row that set it and the value, so that two flags saying different things about
  // one target are refused
  std::map<std::string, std::pair<const FlagRow*, nlohmann::json>> given;
};

// Where one flag value goes: the setter every row's reader calls.
struct FlagSink {
  LaunchState& state;
  const FlagRow& row;
  std::string origin;  // "" the command line, "PET_NNODES=2" the environment

  std::string flag() const { return flag_name(row); }
  // A spec field; `what` names it in messages when the row sets several ("--rdzv-conf timeout").
  void spec(const std::string& pointer, const nlohmann::json& value, const std::string& what = {});
  // A launch setting, checked by its rule (launch_settings.cpp), then applied.
  void setting(const std::string& name, const nlohmann::json& value);
  void problem(std::string message, const std::string& what = {});
  void note(std::string line) { state.notes.push_back(std::move(line)); }
  // The row's text as the type of `rule` reads it (a number, N or MIN:MAX, a string), or nullopt
  // after a problem saying what was expected.
  // `what` names the value in messages ("--rdzv-conf timeout"; default: the flag).
  std::optional<nlohmann::json> typed(const FieldInfo* rule, const std::string& text, const std::string& what = {});
};

// One flag's value (text "" for a toggle) into `state`, through its row's reader.
void apply_flag(const FlagRow& row, const std::string& text, const std::string& origin, LaunchState& state);

// A launch setting: its rule (a FieldInfo with the setting's name as path) and where the checked
// value lands.
struct SettingInfo {
  FieldInfo rule;
  void (*apply)(LaunchState& state, const nlohmann::json& value);
  const char* overrides = "";  // spec fields it overrides, space separated (PET_ precedence)
  bool program_only = false;   // -m, --no-python, --run-path: their PET_ variable only with a program
  const char* note = nullptr;  // accepted, not used: what dtrain does instead
};
const SettingInfo* find_setting(std::string_view name);

// The readers of flags.cpp's rows that are not read by their target's type.
void read_rdzv_conf(const FlagRow& row, const std::string& text, FlagSink& sink);
// The spec field a --rdzv-conf key sets ("/rendezvous/join_timeout_s"), or nullopt.
std::optional<std::string> rdzv_conf_pointer(const std::string& key);

// torchrun's PET_<FLAG> variables of `env` for the rows the command line leaves open (`given`: the
// targets it sets), below the job spec: a variable whose fields `spec_pointers` (the job file and
// --set) set is not used, with a note. Applied to `state`.
void apply_pet(const std::map<std::string, std::string>& env, const std::set<const FlagRow*>& given_rows,
               const std::set<std::string>& spec_pointers, bool has_program, LaunchState& state);

}  // namespace dtrain::config::detail
