// dtrain plan JOB.json [--json], or dtrain plan [OPTIONS] train.py [ARGS]: the computed plan,
// nothing started; refused where dtrain launch would refuse (spec_options.hpp, preflight).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "app.hpp"
#include "dtrain/config/plan.hpp"
#include "spec_options.hpp"

namespace dtrain::cli {

void register_plan(CLI::App& app, Runner& run, const ProgramWords& words) {
  struct Args : LaunchArgs {
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("plan", "show the computed plan of a job (cluster, ranks, batch), start nothing");
  sub->footer("Takes every word dtrain launch takes (torchrun's flags, PET_<FLAG> variables). Refuses what dtrain launch refuses, with its message and exit status: 2 usage or spec error, 126/127 "
              "command not executable/not found. See dtrain-plan(1).");
  args->words = &words;
  add_launch_options(sub, *args);
  sub->add_flag("--json", args->json, "print the plan as one JSON object");
  sub->callback([args, &run] {
    run = [args] {
      config::Launch launch = resolve(*args, /*job_required=*/true);
      if (int rc = preflight(launch); rc != 0) return rc;
      const config::Plan& plan = launch.plan;
      std::string out = args->json ? config::plan_to_json(plan) + "\n" : config::plan_to_text(plan);
      std::fwrite(out.data(), 1, out.size(), stdout);
      return 0;
    };
  });
}

}  // namespace dtrain::cli
