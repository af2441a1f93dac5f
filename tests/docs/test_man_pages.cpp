// The man pages agree with the code: every job spec field of the registry (with its type and
// default) is in dtrain-job(5), every DTRAIN_* parameter is in a man page, every long flag that
// `dtrain <command> --help` shows is in dtrain-<command>(1), every exit code is in dtrain(1), and
// every page renders without groff warnings.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/run_binary.hpp"
#include "dtrain/common/params.hpp"
#include "dtrain/common/worker_env.hpp"
#include "dtrain/config/errors.hpp"
#include "dtrain/config/fields.hpp"
#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using dtrain::test::read_file;
using dtrain::test::run;

namespace {

const fs::path kMan = fs::path(DTRAIN_SOURCE_DIR) / "man";

// Man source as plain text: "\-" -> "-", font escapes and zero-width marks dropped.
std::string plain(std::string s) {
  static const std::regex font(R"(\\f[BIRP])");
  s = std::regex_replace(s, font, "");
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '-') { out += '-'; ++i; }
    else if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '&') { ++i; }
    else out += s[i];
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The section of a man page from `.SH NAME` to the next .SH.
std::string section(const std::string& page, const std::string& name) {
  auto start = page.find(".SH " + name);
  if (start == std::string::npos) start = page.find(".SH \"" + name + "\"");
  if (start == std::string::npos) return {};
  auto end = page.find("\n.SH ", start + 1);
  return page.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// Subcommand names from the "Subcommands:" block of a --help text.
std::vector<std::string> subcommands_of(const std::string& help) {
  std::vector<std::string> out;
  bool in = false;
  for (const auto& line : lines_of(help)) {
    if (line.rfind("Subcommands:", 0) == 0) { in = true; continue; }
    if (!in) continue;
    if (line.size() < 3 || line[0] != ' ' || line[2] == ' ') { if (!line.empty() && line[0] != ' ') in = false; continue; }
    std::istringstream w(line);
    std::string name;
    w >> name;
    out.push_back(name);
  }
  return out;
}

std::set<std::string> long_flags_of(const std::string& help) {
  std::set<std::string> out;
  static const std::regex flag(R"((^|[\s,\[])(--[a-z][a-z0-9-]*))");
  for (const auto& line : lines_of(help)) {
    // Only the option column (descriptions may mention other commands' flags).
    std::string opt = line.size() > 30 ? line.substr(0, 30) : line;
    for (std::sregex_iterator it(opt.begin(), opt.end(), flag), end; it != end; ++it) out.insert((*it)[2]);
  }
  out.erase("--help");
  return out;
}

}  // namespace

TEST_SUITE("docs::man_pages") {
  TEST_CASE("every job spec field is in dtrain-job(5) with the registry's type and default") {
    auto page = lines_of(plain(read_file(kMan / "dtrain-job.5")));
    REQUIRE(page.size() > 50);
    for (const auto& f : dtrain::config::spec_fields()) {
      std::string name = dtrain::config::dotted_name(f.path);
      std::string want = std::string("Type: ") + dtrain::config::type_name(f.type) + "; default: " + f.default_text + ".";
      bool found = false;
      for (std::size_t i = 1; i + 1 < page.size(); ++i)
        if (page[i - 1] == ".TP" && page[i] == ".B " + name) {
          found = true;
          INFO("field " << name << ": dtrain-job.5 says\n  " << page[i + 1] << "\nthe registry says\n  " << want);
          CHECK(page[i + 1] == want);
        }
      CHECK_MESSAGE(found, "spec field " << name << " (" << std::string(f.path) << ") is missing from man/dtrain-job.5 (.TP/.B " << name << ")");
    }
  }

  TEST_CASE("the every-field example sets every field, validates, and is the one dtrain-job(5) shows") {
    std::string file = read_file(fs::path(DTRAIN_SOURCE_DIR) / "examples/jobs/every-field.json");
    auto doc = nlohmann::json::parse(file);
    for (const auto& f : dtrain::config::spec_fields()) {
      if (std::string(f.path) == "/cluster/procs_per_instance") continue;  // the CPU spelling of gpus_per_instance
      CHECK_MESSAGE(doc.contains(nlohmann::json::json_pointer(f.path)),
                    std::string(f.path) << " is missing from examples/jobs/every-field.json");
    }
    dtrain::config::JobSpec spec = dtrain::config::load_spec_text(file, {}, "every-field.json");
    CHECK(spec.name == "every-field");
    // The man page's copy (between the marker and .EE) is the same JSON.
    std::string page = plain(read_file(kMan / "dtrain-job.5"));
    auto mark = page.find("examples/every-field.json");
    if (mark == std::string::npos) mark = page.find("examples/jobs/every-field.json");
    REQUIRE(mark != std::string::npos);
    auto ex = page.find(".EX\n", mark);
    auto ee = page.find("\n.EE", ex);
    REQUIRE(ex != std::string::npos);
    REQUIRE(ee != std::string::npos);
    CHECK(nlohmann::json::parse(page.substr(ex + 4, ee - ex - 4)) == doc);
  }

  TEST_CASE("every DTRAIN_* parameter of the registry is documented in a man page") {
    std::string all;
    for (const auto& e : fs::directory_iterator(kMan)) {
      auto ext = e.path().extension().string();
      if (ext == ".1" || ext == ".3" || ext == ".5" || ext == ".7") all += plain(read_file(e.path()));
    }
    std::string env = section(plain(read_file(kMan / "dtrain.1")), "ENVIRONMENT");
    REQUIRE_FALSE(env.empty());
    for (const auto& p : dtrain::params())
      CHECK_MESSAGE(all.find(p.name) != std::string::npos, std::string(p.name) << " (common/src/params.cpp) is in no man page");
    // The node identity variables dtrain reads are in dtrain(1).
    std::string d1 = plain(read_file(kMan / "dtrain.1"));
    for (const char* v : {"SM_RESOURCE_CONFIG", "SM_HOSTS", "SM_CURRENT_HOST", "SM_NUM_GPUS", "SLURM_JOB_NODELIST",
                          "SLURM_NODEID", "SLURM_NNODES", "SLURM_JOB_ID", "SLURMD_NODENAME", "MASTER_ADDR", "MASTER_PORT",
                          "RANK", "WORLD_SIZE", "LOCAL_RANK", "DTRAIN_RUN_ID", "CUDA_VISIBLE_DEVICES",
                          "/opt/ml/input/config/resourceconfig.json"})
      CHECK_MESSAGE(d1.find(v) != std::string::npos, std::string(v) << " is missing from man/dtrain.1");
  }

  TEST_CASE("every worker variable dtrain sets is in ENVIRONMENT of dtrain-launch(1)") {
    std::string env = section(plain(read_file(kMan / "dtrain-launch.1")), "ENVIRONMENT");
    REQUIRE_FALSE(env.empty());
    for (const auto& v : dtrain::worker_env::variables())
      CHECK_MESSAGE(env.find(std::string(v.name)) != std::string::npos,
                    std::string(v.name) << " (common/src/worker_env.cpp) is missing from ENVIRONMENT of dtrain-launch(1)");
  }

  TEST_CASE("dtrain(1) gives each DTRAIN_* parameter the registry's default") {
    const std::string page = read_file(kMan / "dtrain.1");
    for (const auto& p : dtrain::params()) {
      if (*p.default_value == '\0') continue;  // "unset": the page explains what happens instead
      auto at = page.find(std::string(".B ") + p.name + "\n");
      REQUIRE_MESSAGE(at != std::string::npos, std::string(p.name) << " has no entry in ENVIRONMENT of man/dtrain.1");
      auto end = page.find("\n.TP", at);
      std::string entry = plain(page.substr(at, end == std::string::npos ? std::string::npos : end - at));
      CHECK_MESSAGE(entry.find(std::string("Default ") + p.default_value) != std::string::npos,
                    std::string(p.name) << ": man/dtrain.1 does not say 'Default " << std::string(p.default_value) << "' (common/src/params.cpp)");
    }
  }

  TEST_CASE("every long flag of dtrain <command> --help is in its man page") {
    auto top = run({DTRAIN_BIN, "--help"});
    REQUIRE(top.status == 0);
    std::string d1 = plain(read_file(kMan / "dtrain.1"));
    for (const auto& flag : long_flags_of(top.out))
      CHECK_MESSAGE(d1.find(flag) != std::string::npos, "dtrain " << flag << " is missing from man/dtrain.1");
    auto commands = subcommands_of(top.out);
    CHECK(std::find(commands.begin(), commands.end(), "plan") != commands.end());
    // Commands without their own page are documented in dtrain(1).
    const std::set<std::string> in_dtrain1 = {"help", "env"};
    for (const auto& cmd : commands) {
      fs::path page = kMan / ("dtrain-" + cmd + ".1");
      if (in_dtrain1.count(cmd)) page = kMan / "dtrain.1";
      CHECK_MESSAGE(d1.find(cmd) != std::string::npos, "command " << cmd << " is missing from COMMANDS of man/dtrain.1");
      if (!fs::exists(page)) {
        MESSAGE("skipping dtrain " << cmd << ": " << page.filename().string() << " does not exist yet");
        continue;
      }
      std::string text = plain(read_file(page));
      // The command and its subcommands (e.g. rendezvous serve).
      std::vector<std::vector<std::string>> todo = {{cmd}};
      while (!todo.empty()) {
        auto path = todo.back();
        todo.pop_back();
        std::vector<std::string> argv = {DTRAIN_BIN};
        argv.insert(argv.end(), path.begin(), path.end());
        argv.push_back("--help");
        auto r = run(argv);
        std::string shown;
        for (const auto& p : path) shown += " " + p;
        INFO("dtrain" << shown << " --help");
        CHECK(r.status == 0);
        for (const auto& flag : long_flags_of(r.out))
          CHECK_MESSAGE(text.find(flag) != std::string::npos,
                        "dtrain" << shown << " " << flag << " is missing from man/" << page.filename().string());
        for (const auto& sub : subcommands_of(r.out)) {
          auto next = path;
          next.push_back(sub);
          todo.push_back(next);
        }
      }
    }
  }

  TEST_CASE("every exit code of exit_codes.h is in EXIT STATUS of dtrain(1)") {
    // exit_codes.h holds the values (C, shared with the shim); exit_codes.hpp only names them for C++
    std::string header = read_file(fs::path(DTRAIN_SOURCE_DIR) / "common/include/dtrain/common/exit_codes.h");
    std::string exits = section(plain(read_file(kMan / "dtrain.1")), "EXIT STATUS");
    REQUIRE_FALSE(exits.empty());
    std::set<std::string> documented;
    static const std::regex entry(R"(\n\.B (\d+))");
    for (std::sregex_iterator it(exits.begin(), exits.end(), entry), end; it != end; ++it) documented.insert((*it)[1]);
    static const std::regex code(R"(#define DTRAIN_EXIT_(\w+) (\d+))");
    int count = 0;
    for (std::sregex_iterator it(header.begin(), header.end(), code), end; it != end; ++it, ++count)
      CHECK_MESSAGE(documented.count((*it)[2]), "exit code " << (*it)[1] << " = " << (*it)[2] << " is missing from EXIT STATUS of man/dtrain.1");
    CHECK(count >= 10);
  }

  TEST_CASE("every man page renders without groff warnings") {
    auto groff = run({"/usr/bin/env", "groff", "--version"});
    REQUIRE_MESSAGE(groff.status == 0, "groff is not installed (scripts/install-deps.sh installs groff-base)");
    int pages = 0;
    for (const auto& e : fs::directory_iterator(kMan)) {
      auto ext = e.path().extension().string();
      if (ext != ".1" && ext != ".3" && ext != ".5" && ext != ".7") continue;
      ++pages;
      auto r = run({"/usr/bin/env", "groff", "-man", "-Tutf8", "-ww", "-z", e.path().string()});
      INFO(e.path().filename().string() << ":\n" << r.err);
      CHECK(r.status == 0);
      CHECK(r.err.empty());
    }
    CHECK(pages >= 3);
  }
}
