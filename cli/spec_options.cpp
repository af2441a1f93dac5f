// The job options of plan and launch (spec_options.hpp).
#include "spec_options.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "dtrain/agent/agent.hpp"
#include "dtrain/agent/multinode.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/config/program.hpp"
#include "dtrain/rendezvous/auth.hpp"

namespace dtrain::cli {
namespace {

void add_program_options(CLI::App* sub, SpecArgs& args) {
  sub->add_option("job", args.job_file, "job spec file (JSON, see dtrain-job(5)); a word ending in .json")
      ->type_name("JOB.json");
  sub->add_option("--spec", args.spec_file, "job spec file that supplies what the flags and the program do not")
      ->type_name("JOB.json");
  sub->add_flag("-m,--module", args.module, "the program is a Python module, run as python -m MODULE (torchrun's)");
  sub->add_flag("--no-python", args.no_python, "run the program itself, not through the Python interpreter");
  sub->add_option("--python", args.python, "Python interpreter for a script or module (default: python3 on PATH)")
      ->type_name("PATH");
  sub->add_flag("--run-path", args.run_path, "run the script by its path (torchrun's; what dtrain always does)");
}

void add_torchrun_options(CLI::App* sub, config::Overrides& o) {
  sub->add_option_function<std::string>("--nnodes,--nodes", [&o](const std::string& v) { config::set_nnodes(o, v); },
                                        "number of nodes, N, or MIN:MAX for an elastic job (overrides "
                                        "cluster.instances, Slurm, SageMaker, torch env)")
      ->type_name("N");
  sub->add_option_function<std::string>("--nproc-per-node", [&o](const std::string& v) { config::set_nproc_per_node(o, v); },
                                        "workers per node: a count, gpu (one per GPU), cpu (one per CPU) or auto "
                                        "(GPUs if any, else CPUs)")
      ->type_name("N");
  sub->add_option_function<int>("--node-rank", [&o](const int& v) { o.node_rank = v; },
                                "this node's rank, 0 to nodes-1 (overrides the environment)")
      ->type_name("R");
  sub->add_flag("--standalone", o.standalone, "one node with a rendezvous of its own (ignores the environment's nodes)");
  sub->add_option_function<std::string>("--rdzv-endpoint,--rdzv", [&o](const std::string& v) { o.rdzv = v; },
                                        "rendezvous HOST[:PORT], port 29400 when left out (overrides "
                                        "rendezvous.endpoint)")
      ->type_name("HOST:PORT");
  sub->add_option_function<std::string>("--rdzv-id", [&o](const std::string& v) { o.run_id = v; },
                                        "the run id every node shares (overrides rendezvous.run_id)")
      ->type_name("ID");
  sub->add_option_function<std::string>(
         "--rdzv-backend",
         [&o](const std::string& v) { config::set_rdzv_backend(o, v); },
         "builtin (also c10d, static: dtrain's own rendezvous) or etcd (also etcd-v2: an etcd v3 cluster at "
         "--rdzv-endpoint); overrides rendezvous.backend")
      ->type_name("NAME");
  sub->add_option_function<std::string>("--master-addr", [&o](const std::string& v) { o.master_addr = v; },
                                        "node 0's address: MASTER_ADDR, and the rendezvous host when no endpoint "
                                        "is given (at port 29400)")
      ->type_name("ADDR");
  sub->add_option_function<int>("--master-port", [&o](const int& v) { o.master_port = v; },
                                "MASTER_PORT of the workers, exactly (default: the exported MASTER_PORT, else a "
                                "free port)")
      ->type_name("PORT");
  sub->add_option_function<int>("--max-restarts", [&o](const int& v) { o.max_restarts = v; },
                                "restarts of the whole group after a failure (overrides restart.max_restarts)")
      ->type_name("N");
}

}  // namespace

void add_spec_options(CLI::App* sub, SpecArgs& args) {
  add_program_options(sub, args);
  auto& o = args.overrides;
  add_torchrun_options(sub, o);
  sub->add_option_function<std::string>("--token-file", [&o](const std::string& v) { o.token_file = v; },
                                        "file holding the rendezvous token (overrides rendezvous.token_file)")
      ->type_name("FILE");
  sub->add_flag("--insecure", args.insecure, "allow a multi-node job without a rendezvous token (trusted networks only)");
  sub->add_option("--set", o.sets, "set a spec field before validation; VALUE is JSON, else a string (repeatable)")
      ->type_name("/PTR=VALUE")
      ->expected(1)
      ->allow_extra_args(false)  // one /PTR=VALUE per --set: a job file after it stays the job file
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
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
  config::Plan plan = config::make_plan(spec, ov, env);
  plan.python = pc.python;
  plan.python_source = pc.python_source;
  for (const auto& w : plan.warnings) std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  return plan;
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
