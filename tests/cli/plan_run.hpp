#pragma once
// `dtrain plan --json` through the built binary, for the cli tests.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_binary.hpp"

namespace dtrain::test {

inline bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// `dtrain plan --json ARGS...`, whatever its outcome.
inline Result plan(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = base_env()) {
  std::vector<std::string> argv{DTRAIN_BIN, "plan", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, env);
}

// The plan of a `dtrain plan --json` that must succeed.
inline nlohmann::json ok(const Result& r) {
  INFO("dtrain plan --json ...: " << r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace dtrain::test

// The names every test of a plan or launch command line uses, once.
using dtrain::test::base_env;
using dtrain::test::has;
using dtrain::test::ok;
using dtrain::test::plan;
using dtrain::test::read_file;
using dtrain::test::Result;
using dtrain::test::run;
using dtrain::test::TempDir;
using nlohmann::json;
