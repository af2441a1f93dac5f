// The job's states by name (dtrain/agent/job_state.hpp).
#include "dtrain/agent/job_state.hpp"

namespace dtrain::agent {

const char* state_name(JobState s) {
  switch (s) {
    case JobState::starting: return "starting";
    case JobState::running: return "running";
    case JobState::stopping: return "stopping";
    case JobState::restarting: return "restarting";
    case JobState::done: return "done";
  }
  return "?";
}

}  // namespace dtrain::agent
