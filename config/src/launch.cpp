// A launch from its words to its plan (launch.hpp): the flags, the job file, the PET_ variables,
// the program, the spec, the plan and what reaches the terminal.
#include "dtrain/config/launch.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/program.hpp"
#include "launch_internal.hpp"

namespace dtrain::config {
namespace {

using json = nlohmann::json;
using detail::LaunchState;

void collect(const json& v, const std::string& path, std::set<std::string>& out) {
  if (!path.empty()) out.insert(path);
  if (v.is_object())
    for (const auto& [k, x] : v.items()) collect(x, path + "/" + k, out);
}

// The JSON pointers the job file (and --set) give a value; a text that does not parse gives none
// (loading it reports why).
std::set<std::string> spec_pointers(const std::optional<std::string>& text, const std::vector<std::string>& sets) {
  std::set<std::string> out;
  if (text) {
    json doc = json::parse(*text, nullptr, false);
    if (!doc.is_discarded()) collect(doc, "", out);
  }
  for (const auto& s : sets) out.insert(s.substr(0, s.find('=')));
  return out;
}

std::string read_spec_file(const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    throw ConfigError(fmt::format("job file {}: no such file; give the path of a job spec (see dtrain-job(5))", file));
  if (std::filesystem::is_directory(file, ec))
    throw ConfigError(fmt::format("job file {}: is a directory; give the path of a job spec JSON file", file));
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) throw ConfigError(fmt::format("job file {}: cannot open: {}", file, errno_text(errno)));
  std::ostringstream text;
  if (in.peek() != std::ifstream::traits_type::eof()) text << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("job file {}: cannot read: {}", file, errno_text(errno)));
  return text.str();
}

// The program the words after the options name, or nullopt when there are none.
std::optional<Program> program_of(const LaunchInput& in, const LaunchState& st) {
  if (st.module && st.no_python)
    throw ConfigError("-m/--module runs a Python module and --no-python a program without Python; give one of them");
  if (in.program.empty()) {
    const char* flag = st.module ? "-m" : st.no_python ? "--no-python" : st.run_path ? "--run-path" : nullptr;
    if (flag != nullptr)
      throw ConfigError(fmt::format("{} needs the program after the options, e.g. dtrain launch {} {}", flag, flag,
                                    st.module ? "pkg.train" : st.no_python ? "./train.sh" : "train.py"));
    return std::nullopt;
  }
  if (in.after_dashdash && !st.module && in.program.front().rfind('-', 0) == 0)
    throw ConfigError(fmt::format("after --, the program to run comes first (got '{}'); to append arguments to a "
                                  "job file's command, give the job file first: dtrain launch JOB.json -- ARGS",
                                  in.program.front()));
  Program p;
  p.mode = st.module ? Program::Mode::module
           : (st.no_python || in.after_dashdash) ? Program::Mode::program
                                                 : Program::Mode::script;
  p.words = in.program;
  p.python = st.python;
  p.run_path = st.run_path;
  return p;
}

// "0,3", "0-3,7" (ranks from 0 to limit-1); `flag` names the option in messages.
std::set<int> parse_rank_list(const std::string& list, int limit, const char* flag, const char* what) {
  std::set<int> out;
  for (const auto& part : text::split(list, ',')) {
    auto bad = [&] {
      return ConfigError(fmt::format("{} {}: '{}' is not a {} or a range A-B of {}s 0..{}", flag, list, part, what, what,
                                     limit - 1));
    };
    auto dash = part.find('-');
    int x = 0, y = 0;
    try {
      std::size_t pos = 0;
      x = std::stoi(part.substr(0, dash), &pos);
      if (pos != (dash == std::string::npos ? part.size() : dash)) throw bad();
      y = x;
      if (dash != std::string::npos) {
        std::string rest = part.substr(dash + 1);
        y = std::stoi(rest, &pos);
        if (pos != rest.size()) throw bad();
      }
    } catch (const std::logic_error&) {
      throw bad();
    }
    if (x < 0 || y < x || y >= limit) throw bad();
    for (int k = x; k <= y; ++k) out.insert(k);
  }
  return out;
}

// The ranks whose output reaches the terminal (--ranks, --local-ranks-filter); unset: every rank.
std::optional<std::set<int>> terminal_ranks(const LaunchState& st, const Plan& plan) {
  std::optional<std::set<int>> out;
  if (!st.ranks.empty()) out = parse_rank_list(st.ranks, plan.world_size, "--ranks", "rank");
  if (!st.local_ranks_filter.empty()) {
    std::set<int> local =
        parse_rank_list(st.local_ranks_filter, plan.procs_per_instance, "--local-ranks-filter", "local rank");
    std::set<int> global;
    for (const auto& r : plan.ranks)
      if (r.node_rank == plan.identity.node_rank && local.count(r.local_rank) && (!out || out->count(r.rank)))
        global.insert(r.rank);
    out = std::move(global);
  }
  return out;
}

// The spec of the launch: the job file, a program's command, or the built-in demo job; the flags'
// problems are reported with the spec's.
JobSpec load_spec(const LaunchInput& in, const std::string& file, const std::optional<std::string>& text,
                  bool program, LaunchState& st) {
  std::string source = !file.empty() ? file : program ? std::string(kCommandLine) : std::string("(built-in demo job)");
  if (file.empty() && !program && in.job_required)
    throw ConfigError("no job given; usage: dtrain plan JOB.json, or dtrain plan [OPTIONS] train.py [ARGS] (see "
                      "dtrain-plan(1))");
  JobSpec spec;
  try {
    if (text) spec = load_spec_text(*text, st.ov, file);
    else if (program) spec = command_spec(st.ov);
    else spec = default_spec(st.ov);  // a bare `dtrain launch`: the demo
  } catch (const SpecError& e) {
    std::vector<SpecProblem> all = st.problems;
    all.insert(all.end(), e.problems().begin(), e.problems().end());
    throw SpecError(source, std::move(all));
  }
  if (!st.problems.empty()) throw SpecError(source, st.problems);
  return spec;
}

}  // namespace

Launch resolve_launch(const LaunchInput& in, const Environment& env) {
  LaunchState st;
  std::set<const FlagRow*> given;
  for (const auto& f : in.flags) {
    given.insert(f.row);
    detail::apply_flag(*f.row, f.text, "", st);
  }
  if (!in.job_file.empty() && !st.spec_file.empty())
    throw ConfigError(fmt::format("two job files: {} and --spec {}; give one", in.job_file, st.spec_file));
  const std::string& file = in.job_file.empty() ? st.spec_file : in.job_file;
  std::optional<std::string> text;
  if (!file.empty()) text = read_spec_file(file);
  detail::apply_pet(env.vars, given, spec_pointers(text, st.ov.sets), !in.program.empty(), st);

  std::optional<Program> program = program_of(in, st);
  ProgramCommand pc;
  if (program) {
    pc = program_command(*program, env);
    st.ov.command = pc.command;
    st.ov.default_name = pc.name;
    if (!text) st.ov.default_nproc_per_node = 1;  // torchrun's command line, torchrun's default: one worker per node
  }
  JobSpec spec = load_spec(in, file, text, program.has_value(), st);
  if (program) check_script(*program, spec);
  spec.command.insert(spec.command.end(), in.appended.begin(), in.appended.end());
  if (!program) {
    if (auto py = retarget_python(spec, st.python, env)) pc = *py;
  }

  Launch out;
  out.plan = make_plan(spec, st.ov, env);
  out.plan.python = pc.python;
  out.plan.python_source = pc.python_source;
  out.settings = st.settings;
  out.settings.keep_logs = (st.redirects_set && !st.settings.redirects.none()) || !st.tee.none();
  out.settings.terminal_ranks = terminal_ranks(st, out.plan);
  out.warnings = out.plan.warnings;
  for (const auto& n : st.notes)
    if (std::find(out.notes.begin(), out.notes.end(), n) == out.notes.end()) out.notes.push_back(n);
  return out;
}

std::vector<std::string> set_flag(Overrides& overrides, std::string_view flag, const std::string& text) {
  const FlagRow* row = find_flag(flag);
  if (row == nullptr) throw ConfigError(fmt::format("{}: not a flag of dtrain launch", flag));
  LaunchState st;
  st.ov = std::move(overrides);
  detail::apply_flag(*row, text, "", st);
  overrides = std::move(st.ov);
  if (!st.problems.empty()) throw SpecError(kCommandLine, st.problems);
  return st.notes;
}

}  // namespace dtrain::config
