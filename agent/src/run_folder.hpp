#pragma once
// The run folder: <log_dir>/<run_id>/ when logs are kept (plan.json, attempt-N/rank-R.{out,err}),
// else a private temporary folder, in memory where there is a file system for that, that holds
// plan.json and the progress pages only and is removed at the end (the workers' checkpoint folder
// is then a temporary folder of its own on disk, removed with it).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::agent {

class RunFolder {
 public:
  RunFolder() = default;
  ~RunFolder();  // remove()
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  // log_dir "" : a temporary folder in $XDG_RUNTIME_DIR, else /dev/shm, else $TMPDIR (or /tmp),
  // removed at the end; with `keep` one under $TMPDIR (or /tmp) that stays (the logs are written
  // there too). Throws ConfigError when the log folder cannot be created, IoError for a temporary one.
  void create(const std::string& log_dir, const std::string& run_id, bool keep = false);
  // Writes plan.json (the plan the workers find through DTRAIN_PLAN; "{}" when empty).
  void write_plan(const std::string& json) const;
  // The folder of one generation's logs, created; nullopt when logs are not kept.
  std::optional<std::filesystem::path> attempt(int generation) const;
  // That folder's path, kept logs or not (the workers' error files go there), not created.
  std::filesystem::path attempt_path(int generation) const { return path_ / ("attempt-" + std::to_string(generation)); }

  // The workers' checkpoint folder (DTRAIN_CHECKPOINT_DIR), absolute and created (mode 0700 when
  // this creates it): `spec_dir` (restart.checkpoint_dir) relative to `workdir`, or, unset,
  // <this folder>/checkpoint, or, when this folder is a temporary one in memory, a temporary folder
  // $TMPDIR/dtrain-<run id>-checkpoint-XXXXXX (made on the first call). Throws ConfigError when
  // it cannot be made (a file in the way, no permission), ResourceError when the disk is full.
  std::filesystem::path checkpoint_dir(const std::optional<std::string>& spec_dir, const std::filesystem::path& workdir);

  // Removes a temporary folder (and its checkpoint folder) now; nothing for a kept one.
  void remove();
  // What remove() would remove (for the guardian, should the agent die first).
  std::vector<std::filesystem::path> temporary_folders() const;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path plan_path() const { return path_ / "plan.json"; }
  bool kept() const { return !temporary_; }

 private:
  std::filesystem::path path_;
  bool temporary_ = false;
  bool checkpoint_apart_ = false;          // temporary and in memory: the checkpoint folder is elsewhere
  std::string run_id_;
  std::filesystem::path own_checkpoint_;   // that folder, once made
  bool removed_ = false;
};

}  // namespace dtrain::agent
