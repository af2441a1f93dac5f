#include "dtrain/config/errors.hpp"

#include <fmt/format.h>

namespace dtrain::config {
namespace {

std::string format_problems(const std::string& source, const std::vector<SpecProblem>& problems) {
  std::string where = source.empty() ? std::string("job spec") : source;
  auto line = [](const SpecProblem& p) {
    return p.path.empty() ? p.message : fmt::format("{}: {}", p.path, p.message);
  };
  // the flags and the program themselves: their names say where
  if (problems.size() == 1 && source == kCommandLine) return line(problems.front());
  if (problems.size() == 1) return fmt::format("{}: {}", where, line(problems.front()));
  // A spec with 40,000 bad keys gets a readable message: the first ones and a count.
  constexpr std::size_t kShown = 50;
  std::string out = fmt::format("{}: {} problems:", where, problems.size());
  for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) out += "\n  " + line(problems[i]);
  if (problems.size() > kShown) out += fmt::format("\n  ... and {} more", problems.size() - kShown);
  return out;
}

}  // namespace

SpecError::SpecError(std::string source, std::vector<SpecProblem> problems)
    : ConfigError(format_problems(source, problems)), problems_(std::move(problems)) {}

}  // namespace dtrain::config
