#pragma once
// `dtrain launch JOB.json -- ARGS...`: main() takes the words after the first "--" of a launch
// command line out of argv before CLI parsing, so that they reach the worker command untouched.
#include <string>
#include <vector>

namespace dtrain::cli {

std::vector<std::string>& launch_extra_args();
// Removes "-- ARGS..." from argv when the command is `launch`; returns the new argc.
int split_launch_args(int argc, char** argv);

}  // namespace dtrain::cli
