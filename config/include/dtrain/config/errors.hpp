#pragma once
#include <string>
#include <vector>

#include "dtrain/common/errors.hpp"

namespace dtrain::config {

// One problem in a spec: "/batch/global: 500 does not divide by world size 16".
struct SpecProblem {
  std::string path;     // JSON pointer, or the flag/env variable name
  std::string message;  // names the value and what was expected
};

// The source of problems in the flags and the program of a launch without a job file.
inline constexpr const char* kCommandLine = "command line";

// Every problem found in a spec at once; what() lists them one per line.
class SpecError : public ConfigError {
 public:
  SpecError(std::string source, std::vector<SpecProblem> problems);
  const std::vector<SpecProblem>& problems() const { return problems_; }

 private:
  std::vector<SpecProblem> problems_;
};

}  // namespace dtrain::config
