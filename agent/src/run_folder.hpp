#pragma once
// The run folder: <log_dir>/<run_id>/ when logs are kept (plan.json, attempt-N/rank-R.{out,err}),
// else a private temporary folder that holds plan.json only and is removed at the end.
#include <filesystem>
#include <optional>
#include <string>

namespace dtrain::agent {

class RunFolder {
 public:
  RunFolder() = default;
  ~RunFolder();  // removes a temporary folder
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  // log_dir "" : a temporary folder under $TMPDIR (or /tmp), removed at the end unless `keep`
  // (then the logs are written there too). Throws ConfigError when the log folder cannot be
  // created, IoError for a temporary one.
  void create(const std::string& log_dir, const std::string& run_id, bool keep = false);
  // Writes plan.json (the plan the workers find through DTRAIN_PLAN; "{}" when empty).
  void write_plan(const std::string& json) const;
  // The folder of one generation's logs, created; nullopt when logs are not kept.
  std::optional<std::filesystem::path> attempt(int generation) const;

  // The workers' checkpoint folder (DTRAIN_CHECKPOINT_DIR), absolute and created (mode 0700 when
  // this creates it): `spec_dir` (restart.checkpoint_dir) relative to `workdir`, or, unset,
  // <this folder>/checkpoint. Throws ConfigError when it cannot be made (a file in the way, no
  // permission), ResourceError when the disk is full.
  std::filesystem::path checkpoint_dir(const std::optional<std::string>& spec_dir,
                                       const std::filesystem::path& workdir) const;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path plan_path() const { return path_ / "plan.json"; }
  bool kept() const { return !temporary_; }

 private:
  std::filesystem::path path_;
  bool temporary_ = false;
};

}  // namespace dtrain::agent
