#pragma once
// What the real-process collectives tests (test_launch.cpp, test_p2p_launch.cpp) give `dtrain launch`:
// the clean test environment with the engine, the deadline and engine logging chosen.
#include <map>
#include <string>

#include "../cli/run_binary.hpp"

namespace dtrain::coll::test {

inline std::map<std::string, std::string> env_for(const std::string& transport, const std::string& timeout_s = "60") {
  auto env = dtrain::test::base_env();
  env["DTRAIN_TRANSPORT"] = transport;
  env["DTRAIN_COLL_TIMEOUT_S"] = timeout_s;
  env["DTRAIN_LOG"] = "info:coll";
  return env;
}

}  // namespace dtrain::coll::test
