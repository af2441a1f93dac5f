#pragma once
// One generation of this node's workers and what starts afresh with each generation: the worker
// group, the workers' progress pages, the processes that left their groups, and each rank's error
// file. The agent (agent_impl.hpp) drives it from the job machine's actions; a restart is a new
// generation in the same object.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/agent/env.hpp"
#include "dtrain/config/plan.hpp"
#include "escapees.hpp"
#include "guardian.hpp"
#include "progress_board.hpp"
#include "worker_group.hpp"

namespace dtrain::agent {

class Generation {
 public:
  Generation(OutputRouter& router, Guardian& guardian, Reaper& reaper, WorkerGroup::Listener& listener)
      : guardian_(guardian), group_(router, guardian, reaper, listener) {}

  WorkerGroup& group() { return group_; }
  const WorkerGroup& group() const { return group_; }
  ProgressBoard& board() { return board_; }
  const ProgressBoard& board() const { return board_; }

  // A generation starts: the last one's workers and error files are forgotten.
  void begin();
  // Starts the worker of rank `r` with `env` on `cpus` (empty: unbound), its progress page and its
  // TORCHELASTIC_ERROR_FILE in `attempt_dir`, its logs in `logs` when kept. `reap_escapees`: the
  // first start makes the agent a subreaper (escapees.hpp). Throws what WorkerGroup::spawn and prepare_error_file throw.
  void spawn(const config::RankInfo& r, EnvMap env, const std::filesystem::path& attempt_dir,
             const std::optional<std::filesystem::path>& logs, bool reap_escapees, const std::vector<int>& cpus);
  // The TORCHELASTIC_ERROR_FILE of this generation's rank, "" when it has none.
  std::string error_file(int rank) const;

  // The generation is over: its workers leave the group, what left their groups is killed, and their
  // shared-memory segments (named `shm_prefix`*) are removed.
  void end(const std::string& shm_prefix);
  // Removes the segments the workers left (a worker killed during setup leaves one); once every
  // worker that could have made one is gone and swept, there is nothing more to look for.
  void sweep_segments(const std::string& shm_prefix);
  // Nothing of the job can be left: no worker alive, and none started or every process that left a
  // worker's group gone (killed here, waiting up to 1 s).
  bool all_gone();
  // Kills what left a worker's group, waiting up to `wait_ms` (Escapees::kill_all).
  bool kill_escapees(int wait_ms) { return escapees_.kill_all(wait_ms); }

 private:
  void watch_escapees(bool reap_escapees);

  Guardian& guardian_;
  WorkerGroup group_;
  ProgressBoard board_;
  Escapees escapees_;
  std::map<int, std::string> error_files_;  // TORCHELASTIC_ERROR_FILE of each local rank
  bool spawned_any_ = false;       // some generation's workers were started
  bool escapees_watched_ = false;
  bool unswept_ = false;           // workers ran since the last sweep of their segments
};

}  // namespace dtrain::agent
