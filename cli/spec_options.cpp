// The options of plan and launch, one per flag row (spec_options.hpp).
#include "spec_options.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "dtrain/agent/agent.hpp"
#include "dtrain/agent/multinode.hpp"
#include "dtrain/rendezvous/store/auth.hpp"

namespace dtrain::cli {

void add_launch_options(CLI::App* sub, LaunchArgs& args) {
  config::LaunchInput& in = args.input;
  sub->add_option("job", in.job_file, "job spec file (JSON, see dtrain-job(5)); a word ending in .json")
      ->type_name("JOB.json");
  for (const config::FlagRow& row : config::flag_rows()) {
    const config::FlagRow* r = &row;
    switch (row.kind) {
      case config::FlagKind::toggle:
        sub->add_flag_callback(cli11_names(row), [&in, r] { in.flags.push_back({r, ""}); }, row.help);
        break;
      case config::FlagKind::value:
        // torchrun (argparse) takes the last of a repeated option
        sub->add_option_function<std::string>(cli11_names(row), [&in, r](const std::string& v) { in.flags.push_back({r, v}); },
                                              row.help)
            ->type_name(row.type_name)
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        break;
      case config::FlagKind::repeated:
        sub->add_option_function<std::vector<std::string>>(
               cli11_names(row),
               [&in, r](const std::vector<std::string>& vs) {
                 for (const auto& v : vs) in.flags.push_back({r, v});
               },
               row.help)
            ->type_name(row.type_name)
            ->expected(1)
            ->allow_extra_args(false)  // one value each time: a job file after it stays the job file
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        break;
    }
  }
}

config::Launch resolve(LaunchArgs& args, bool job_required) {
  config::LaunchInput& in = args.input;
  in.job_required = job_required;
  if (args.words != nullptr) {
    in.program = args.words->words;
    in.after_dashdash = args.words->after_dashdash;
    in.appended = args.words->appended;
  }
  config::Launch launch = config::resolve_launch(in, config::Environment::current());
  for (const auto& w : launch.warnings) std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  for (const auto& n : launch.notes) std::fprintf(stderr, "dtrain: note: %s\n", n.c_str());
  return launch;
}


int preflight(const config::Launch& launch) {
  const config::Plan& plan = launch.plan;
  if (agent::is_multinode(plan) && !config::starts_every_host(plan))
    agent::check_token(plan, rdzv::auth::resolve_token(plan.spec.rendezvous.token_file.value_or("")),
                       launch.settings.insecure);
  auto refused = agent::check_command(plan);
  if (!refused) return 0;
  std::fprintf(stderr, "dtrain: %s\n", refused->message.c_str());
  return refused->code;
}

}  // namespace dtrain::cli
