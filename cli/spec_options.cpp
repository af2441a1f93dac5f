#include "spec_options.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "dtrain/common/errors.hpp"

namespace dtrain::cli {

void add_spec_options(CLI::App* sub, SpecArgs& args) {
  sub->add_option("job", args.job_file, "job spec file (JSON, see dtrain-job(5))")->type_name("JOB.json");
  auto& o = args.overrides;
  sub->add_option_function<int>("--nodes", [&o](const int& v) { o.nodes = v; },
                                "number of nodes (overrides cluster.instances, Slurm, SageMaker, torch env)")
      ->type_name("N");
  sub->add_option_function<int>("--node-rank", [&o](const int& v) { o.node_rank = v; },
                                "this node's rank, 0 to nodes-1 (overrides the environment)")
      ->type_name("R");
  sub->add_option_function<int>("--nproc-per-node", [&o](const int& v) { o.nproc_per_node = v; },
                                "workers per node (overrides cluster.gpus_per_instance/procs_per_instance)")
      ->type_name("N");
  sub->add_option_function<std::string>("--rdzv", [&o](const std::string& v) { o.rdzv = v; },
                                        "rendezvous endpoint (overrides rendezvous.endpoint)")
      ->type_name("HOST:PORT");
  sub->add_option_function<std::string>("--token-file", [&o](const std::string& v) { o.token_file = v; },
                                        "file holding the rendezvous token (overrides rendezvous.token_file)")
      ->type_name("FILE");
  sub->add_option("--set", o.sets, "set a spec field before validation; VALUE is JSON, else a string (repeatable)")
      ->type_name("/PTR=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

config::Plan load_plan(const SpecArgs& args, bool job_required, const config::Environment& env) {
  config::JobSpec spec;
  if (args.job_file.empty()) {
    if (job_required) throw ConfigError("no job file given; usage: dtrain plan JOB.json (see dtrain-job(5) for the format)");
    spec = config::default_spec(args.overrides);
  } else {
    spec = config::load_spec_file(args.job_file, args.overrides);
  }
  config::Plan plan = config::make_plan(spec, args.overrides, env);
  for (const auto& w : plan.warnings) std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  return plan;
}

config::Plan load_plan(const SpecArgs& args, bool job_required) {
  return load_plan(args, job_required, config::Environment::current());
}

}  // namespace dtrain::cli
