// The job options of plan and launch (spec_options.hpp).
#include "spec_options.hpp"

#include <algorithm>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "dtrain/agent/agent.hpp"
#include "dtrain/agent/multinode.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/config/program.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "torchrun_flags.hpp"

namespace dtrain::cli {
namespace {

void add_program_options(CLI::App* sub, SpecArgs& args) {
  sub->add_option("job", args.job_file, "job spec file (JSON, see dtrain-job(5)); a word ending in .json")
      ->type_name("JOB.json");
  sub->add_option("--spec", args.spec_file, "job spec file that supplies what the flags and the program do not")
      ->type_name("JOB.json");
  sub->add_flag("-m,--module", args.module, "the program is a Python module, run as python -m MODULE (torchrun's)");
  sub->add_flag("--no-python", args.no_python, "run the program itself, not through the Python interpreter");
  sub->add_option("--python", args.python, "Python interpreter of a script or module, and of a job file's Python command (default: "
                                       "PYTHON_EXEC, else python3 on PATH)")
      ->type_name("PATH");
  sub->add_flag("--run-path", args.run_path, "run the script by its path (torchrun's; what dtrain always does)");
}

}  // namespace

void add_spec_options(CLI::App* sub, SpecArgs& args) {
  add_program_options(sub, args);
  auto& o = args.overrides;
  add_torchrun_options(sub, args);
  add_run_options(sub, args);
  sub->add_option_function<std::string>("--token-file", [&o](const std::string& v) { o.token_file = v; },
                                        "file holding the rendezvous token (overrides rendezvous.token_file)")
      ->type_name("FILE");
  sub->add_flag("--insecure", args.insecure, "allow a multi-node job without a rendezvous token (trusted networks only)");
  sub->add_option("--set", o.sets, "set a spec field before validation; VALUE is JSON, else a string (repeatable)")
      ->type_name("/PTR=VALUE")
      ->expected(1)
      ->allow_extra_args(false)  // one /PTR=VALUE per --set: a job file after it stays the job file
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // torchrun (argparse) takes the last of a repeated option: so does every option with one value
  for (CLI::Option* opt : sub->get_options())
    if (!opt->get_lnames().empty() && opt->get_lnames().front() != "set" && opt->get_items_expected_max() == 1)
      opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

namespace {

// The program the words after the options name, or nullopt when there are none.
std::optional<config::Program> program_of(const SpecArgs& a) {
  const ProgramWords none;
  const ProgramWords& w = a.program != nullptr ? *a.program : none;
  if (a.module && a.no_python)
    throw ConfigError("-m/--module runs a Python module and --no-python a program without Python; give one of them");
  if (w.words.empty()) {
    const char* flag = a.module ? "-m" : a.no_python ? "--no-python" : a.run_path ? "--run-path" : nullptr;
    if (flag != nullptr)
      throw ConfigError(fmt::format("{} needs the program after the options, e.g. dtrain launch {} {}", flag, flag,
                                    a.module ? "pkg.train" : a.no_python ? "./train.sh" : "train.py"));
    return std::nullopt;
  }
  if (w.after_dashdash && !a.module && w.words.front().rfind('-', 0) == 0)
    throw ConfigError(fmt::format("after --, the program to run comes first (got '{}'); to append arguments to a "
                                  "job file's command, give the job file first: dtrain launch JOB.json -- ARGS",
                                  w.words.front()));
  config::Program p;
  p.mode = a.module ? config::Program::Mode::module
           : (a.no_python || w.after_dashdash) ? config::Program::Mode::program
                                               : config::Program::Mode::script;
  p.words = w.words;
  p.python = a.python;
  p.run_path = a.run_path;
  return p;
}

}  // namespace

config::Plan load_plan(const SpecArgs& args, bool job_required, const config::Environment& env) {
  if (!args.job_file.empty() && !args.spec_file.empty())
    throw ConfigError(fmt::format("two job files: {} and --spec {}; give one", args.job_file, args.spec_file));
  const std::string& file = args.job_file.empty() ? args.spec_file : args.job_file;
  config::Overrides ov = args.overrides;
  std::optional<config::Program> program = program_of(args);
  config::ProgramCommand pc;
  if (program) {
    pc = config::program_command(*program, env);
    ov.command = pc.command;
    ov.default_name = pc.name;
  }
  config::JobSpec spec;
  if (!file.empty()) {
    spec = config::load_spec_file(file, ov);
  } else if (program) {
    ov.default_nproc_per_node = 1;  // torchrun's command line, torchrun's default: one worker per node
    spec = config::command_spec(ov);
  } else if (job_required) {
    throw ConfigError("no job given; usage: dtrain plan JOB.json, or dtrain plan [OPTIONS] train.py [ARGS] (see "
                      "dtrain-plan(1))");
  } else {
    spec = config::default_spec(ov);  // a bare `dtrain launch`: the demo
  }
  if (program) config::check_script(*program, spec);
  if (args.program != nullptr)
    spec.command.insert(spec.command.end(), args.program->appended.begin(), args.program->appended.end());
  if (!program) {
    if (auto py = config::retarget_python(spec, args.python, env)) pc = *py;
  }
  config::Plan plan = config::make_plan(spec, ov, env);
  plan.python = pc.python;
  plan.python_source = pc.python_source;
  if (!args.run.redirects.empty()) (void)parse_streams(args.run.redirects, "--redirects");
  if (!args.run.tee.empty()) (void)parse_streams(args.run.tee, "--tee");
  if (args.run.role.empty()) throw ConfigError("--role: empty; expected a role name such as trainer (ROLE_NAME)");
  (void)terminal_ranks(args.run, plan);
  for (const auto& w : plan.warnings) std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  std::vector<std::string> said;
  for (const auto& n : args.notes) {
    if (std::find(said.begin(), said.end(), n) != said.end()) continue;
    said.push_back(n);
    std::fprintf(stderr, "dtrain: note: %s\n", n.c_str());
  }
  return plan;
}

namespace {

// "0,3", "0-3,7" (ranks from 0 to limit-1); `flag` names the option in messages.
std::set<int> parse_rank_list(const std::string& list, int limit, const char* flag, const char* what) {
  std::set<int> out;
  for (const auto& part : text::split(list, ',')) {
    auto bad = [&] {
      return ConfigError(fmt::format("{} {}: '{}' is not a {} or a range A-B of {}s 0..{}", flag, list, part, what, what,
                                     limit - 1));
    };
    if (part.empty()) throw bad();
    auto dash = part.find('-');
    int x = 0, y = 0;
    try {
      std::size_t pos = 0;
      if (dash == std::string::npos) {
        x = y = std::stoi(part, &pos);
        if (pos != part.size()) throw bad();
      } else {
        x = std::stoi(part.substr(0, dash), &pos);
        if (pos != dash) throw bad();
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

}  // namespace

std::optional<std::set<int>> terminal_ranks(const RunArgs& run, const config::Plan& plan) {
  std::optional<std::set<int>> out;
  if (!run.ranks.empty()) out = parse_rank_list(run.ranks, plan.world_size, "--ranks", "rank");
  if (!run.local_ranks_filter.empty()) {
    std::set<int> local = parse_rank_list(run.local_ranks_filter, plan.procs_per_instance, "--local-ranks-filter",
                                          "local rank");
    std::set<int> global;
    for (const auto& r : plan.ranks)
      if (r.node_rank == plan.identity.node_rank && local.count(r.local_rank) &&
          (!out || out->count(r.rank)))
        global.insert(r.rank);
    out = std::move(global);
  }
  return out;
}

agent::StreamChoice parse_streams(const std::string& text, const char* flag) {
  agent::StreamChoice c;
  auto bad = [&] {
    return ConfigError(fmt::format("{} {}: expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or LOCAL_RANK:N "
                                   "pairs such as 0:3,1:2", flag, text));
  };
  auto digit = [&](const std::string& d) {
    if (d.size() != 1 || d[0] < '0' || d[0] > '3') throw bad();
    return d[0] - '0';
  };
  if (text.find(':') == std::string::npos) {
    c.all = digit(text);
    return c;
  }
  for (const auto& part : text::split(text, ',')) {
    auto colon = part.find(':');
    if (colon == std::string::npos || colon == 0) throw bad();
    int rank = 0;
    try {
      std::size_t pos = 0;
      rank = std::stoi(part.substr(0, colon), &pos);
      if (pos != colon || rank < 0) throw bad();
    } catch (const std::logic_error&) {
      throw bad();
    }
    c.by_local_rank[rank] = digit(part.substr(colon + 1));
  }
  return c;
}

config::Plan load_plan(const SpecArgs& args, bool job_required) {
  return load_plan(args, job_required, config::Environment::current());
}

int preflight(const config::Plan& plan, bool insecure) {
  if (agent::is_multinode(plan))
    agent::check_token(plan, rdzv::auth::resolve_token(plan.spec.rendezvous.token_file.value_or("")), insecure);
  auto refused = agent::check_command(plan);
  if (!refused) return 0;
  std::fprintf(stderr, "dtrain: %s\n", refused->message.c_str());
  return refused->code;
}

}  // namespace dtrain::cli
