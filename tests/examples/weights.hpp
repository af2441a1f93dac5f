#pragma once
// What the equivalence tests of tests/examples compare: two runs' final weights.
#include <algorithm>
#include <cmath>
#include <vector>

namespace dtrain::test {

// The bar of the equivalence tests: float64 weights agree to this relative difference.
inline constexpr double kWeightTolerance = 1e-9;

// max |a - b| / max |b|
inline double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / scale;
}

}  // namespace dtrain::test
