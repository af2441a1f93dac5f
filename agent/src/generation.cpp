// The current generation of this node's workers (generation.hpp).
#include "generation.hpp"

#include "dtrain/agent/stacks.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/shm_names.hpp"
#include "failure_report.hpp"

namespace dtrain::agent {

void Generation::begin() {
  group_.clear_retired();
  spawned_any_ = unswept_ = true;
  error_files_.clear();
}

void Generation::spawn(const config::RankInfo& r, EnvMap env, const std::filesystem::path& attempt_dir,
                       const std::optional<std::filesystem::path>& logs, bool reap_escapees,
                       const std::vector<int>& cpus) {
  if (std::string page = board_.reset(r.rank); !page.empty()) {
    env["DTRAIN_PROGRESS_FILE"] = page;
    // where its Python start-up hook writes its stacks (stacks.hpp); an earlier worker's file names
    // a process that is gone
    auto stacks = stacks_file(std::filesystem::path(page).parent_path(), r.rank);
    std::error_code ec;
    std::filesystem::remove(stacks, ec);
    env["DTRAIN_STACKS_FILE"] = stacks.string();
  }
  error_files_[r.rank] = env["TORCHELASTIC_ERROR_FILE"] = prepare_error_file(attempt_dir, r.rank).string();
  watch_escapees(reap_escapees);
  group_.spawn(r, env, logs, cpus);
}

std::string Generation::error_file(int rank) const {
  auto it = error_files_.find(rank);
  return it == error_files_.end() ? std::string() : it->second;
}

void Generation::end(const std::string& shm_prefix) {
  group_.retire();
  escapees_.kill_all(1000);  // what left a worker's group dies with the generation
  sweep_segments(shm_prefix);
}

void Generation::sweep_segments(const std::string& shm_prefix) {
  if (!unswept_) return;
  if (std::size_t n = shm_names::sweep(shm_prefix))
    DTRAIN_DEBUG(agent, "removed {} shared-memory segment(s) {}* the workers left", n, shm_prefix);
  if (group_.live() == 0) unswept_ = false;
}

bool Generation::all_gone() { return group_.live() == 0 && (!spawned_any_ || escapees_.kill_all(1000)); }

// Once, right before the first worker starts: the guardian's starter must be gone before we become
// a subreaper, or the guardian would be re-parented to us (it was started early, so by now it is).
void Generation::watch_escapees(bool reap_escapees) {
  if (escapees_watched_) return;
  escapees_watched_ = true;
  guardian_.settle();
  if (reap_escapees) escapees_.start([this] { return group_.live_pids(); });
}

}  // namespace dtrain::agent
