#include "app.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/params.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/errors.hpp"
#include "command_line.hpp"

namespace dtrain::cli {
namespace {

void register_help(CLI::App& app, Runner& run) {
  auto topic = std::make_shared<std::vector<std::string>>();
  CLI::App* sub = app.add_subcommand("help", "show help for dtrain or one of its commands");
  sub->add_option("command", *topic, "command to explain, e.g. plan");
  sub->callback([&app, topic, &run] {
    run = [&app, topic]() -> int {
      CLI::App* target = &app;
      std::string path = "dtrain";
      for (const auto& name : *topic) {
        CLI::App* next = nullptr;
        for (CLI::App* s : target->get_subcommands({}))
          if (s->get_name() == name) next = s;
        if (next == nullptr) {
          std::vector<std::string> names;
          for (CLI::App* s : target->get_subcommands({})) names.push_back(s->get_name());
          auto near = suggest(name, names);
          std::fprintf(stderr, "dtrain: no command '%s' in '%s'%s; commands: %s\n", name.c_str(), path.c_str(),
                       near ? (", did you mean '" + *near + "'?").c_str() : "", text::join(names, ", ").c_str());
          return exit_code::usage;
        }
        target = next;
        path += " " + name;
      }
      // App::help() would show the help of the chosen subcommand (this one); format the target's own.
      std::string text = target->get_formatter()->make_help(target, path, CLI::AppFormatMode::Normal);
      std::fwrite(text.data(), 1, text.size(), stdout);
      if (target == &app) std::printf("\nSee dtrain(1) and, for a command, dtrain-<command>(1).\n");
      return exit_code::ok;
    };
  });
}

void register_env(CLI::App& app, Runner& run) {
  CLI::App* sub = app.add_subcommand("env", "list the DTRAIN_* environment variables dtrain reads, with defaults");
  sub->callback([&run] {
    run = [] {
      std::printf("%-24s %-10s %s\n", "NAME", "DEFAULT", "MEANING (current value when set)");
      for (const auto& p : params()) {
        std::string def = *p.default_value ? p.default_value : "(unset)";
        std::printf("%-24s %-10s %s", p.name, def.c_str(), p.help);
        if (const char* v = std::getenv(p.name); v != nullptr) {
          bool secret = std::string_view(p.name).find("TOKEN") != std::string_view::npos;
          std::printf(" [now: %s]", secret ? "set, not shown" : v);
        }
        std::printf("\n");
      }
      return exit_code::ok;
    };
  });
}

// The subcommands, in the order of `dtrain --help`.
struct Command {
  const char* name;
  void (*add)(CLI::App&, Runner&, const ProgramWords&);
};
constexpr Command kCommands[] = {
    {"plan", [](CLI::App& a, Runner& r, const ProgramWords& w) { register_plan(a, r, w); }},
    {"launch", [](CLI::App& a, Runner& r, const ProgramWords& w) { register_launch(a, r, w); }},
    {"rendezvous", [](CLI::App& a, Runner& r, const ProgramWords&) { register_rendezvous(a, r); }},
    {"status", [](CLI::App& a, Runner& r, const ProgramWords&) { register_status(a, r); }},
    {"token", [](CLI::App& a, Runner& r, const ProgramWords&) { register_token(a, r); }},
    {"env", [](CLI::App& a, Runner& r, const ProgramWords&) { register_env(a, r); }},
    {"help", [](CLI::App& a, Runner& r, const ProgramWords&) { register_help(a, r); }},
};

// The first word that is not an option must name a command; CLI11 alone would say only
// "argument not expected", so answer with "did you mean". `at` is where the command word is.
int check_command_word(int argc, char** argv, int& at) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (!a.empty() && a[0] == '-') continue;
    std::vector<std::string> names;
    for (const Command& c : kCommands) {
      if (a == c.name) {
        at = i;
        return -1;
      }
      names.emplace_back(c.name);
    }
    auto near = suggest(a, names);
    if (near)
      std::fprintf(stderr, "dtrain: unknown command '%s'; did you mean '%s'?\n", a.c_str(), near->c_str());
    else
      std::fprintf(stderr, "dtrain: unknown command '%s'; commands: %s\n", a.c_str(), text::join(names, ", ").c_str());
    std::fprintf(stderr, "Run 'dtrain help' for the list of commands.\n");
    return exit_code::usage;
  }
  return -1;
}

}  // namespace

int run(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--version") {  // without building the whole command line
    std::puts("dtrain " DTRAIN_VERSION);
    return exit_code::ok;
  }
  int at = -1;
  if (int rc = check_command_word(argc, argv, at); rc >= 0) return rc;
  CLI::App app{"dtrain: launch and supervise distributed training jobs", "dtrain"};
  app.set_version_flag("--version", "dtrain " DTRAIN_VERSION);
  app.require_subcommand(1);
  app.footer("Exit status: 0 ok, 2 usage or job spec error; see dtrain(1) for the full table.");
  Runner runner;
  ProgramWords program;
  // Only the chosen command's options are built (a launch does not pay for the others'), unless
  // the command is help or none is given (dtrain --help lists them all).
  const std::string_view chosen = at > 0 ? std::string_view(argv[at]) : std::string_view("help");
  for (const Command& c : kCommands)
    if (chosen == "help" || chosen == c.name) c.add(app, runner, program);
  try {
    std::vector<std::string> args(argv, argv + argc);
    if (at > 0 && (args[std::size_t(at)] == "launch" || args[std::size_t(at)] == "plan")) {
      // the program and its arguments are not CLI11's (command_line.hpp)
      std::vector<std::string> rest(args.begin() + at + 1, args.end());
      args.resize(std::size_t(at) + 1);
      CLI::App* sub = app.get_subcommand(args.back());
      for (auto& a : split_program(*sub, rest, program)) args.push_back(std::move(a));
    }
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : exit_code::usage;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return exit_code::usage;
  }
  try {
    return runner ? runner() : exit_code::usage;
  } catch (const config::SpecError& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    bool identity = false;
    // a variable's name (SLURM_NODEID, SM_HOSTS, MASTER_PORT): the environment is at fault
    auto variable = [](const std::string& s) {
      return !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string::npos;
    };
    for (const auto& p : e.problems()) identity = identity || variable(p.path);
    std::fprintf(stderr, "hint: every job spec field, its type and default: man 5 dtrain-job%s\n",
                 identity ? "; node identity from the environment: man 1 dtrain (NODE IDENTITY)" : "");
    return exit_code::usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    return exit_status_of(e);
  }
}

}  // namespace dtrain::cli
