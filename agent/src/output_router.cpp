// Worker output routing (output_router.hpp).
#include "output_router.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "visible_text.hpp"

namespace dtrain::agent {

WorkerOutput::~WorkerOutput() {
  if (out_.log_fd >= 0) ::close(out_.log_fd);
  if (err_.log_fd >= 0) ::close(err_.log_fd);
}

OutputRouter::OutputRouter(const config::OutputSpec& spec, OutputOptions options, Terminal& terminal)
    : spec_(spec), opt_(std::move(options)), terminal_(terminal) {}

void OutputRouter::open(WorkerOutput& w, const config::RankInfo& r,
                        const std::optional<std::filesystem::path>& log_dir) const {
  w.rank_ = r.rank;
  if (log_dir) {
    auto open_log = [&](const char* ext) {
      auto p = *log_dir / fmt::format("rank-{}.{}", r.rank, ext);
      int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
      if (fd < 0) DTRAIN_WARN(agent, "cannot open log {}: {}", p.string(), errno_text(errno));
      return fd;
    };
    w.out_.log_fd = open_log("out");
    w.err_.log_fd = open_log("err");
  }
  if (spec_.tag) {
    w.out_.tag = format_tag(spec_.tag_format, r.node_rank, r.rank, r.local_rank, "stdout");
    w.err_.tag = format_tag(spec_.tag_format, r.node_rank, r.rank, r.local_rank, "stderr");
  }
  w.to_terminal_ = !opt_.terminal_ranks || opt_.terminal_ranks->count(r.rank) > 0;
  w.redirected_ = opt_.redirects.of(r.local_rank);
}

std::string OutputRouter::timestamp() const {
  return spec_.timestamps ? timestamp_prefix(std::chrono::system_clock::now()) : std::string();
}

void OutputRouter::feed(WorkerOutput& w, bool is_err, const char* data, std::size_t n) {
  auto& s = w.stream(is_err);
  if (s.log_fd >= 0 && !write_all(s.log_fd, std::string_view(data, n))) {
    DTRAIN_WARN(agent, "log file of rank {}: {}", w.rank_, errno_text(errno));
    ::close(s.log_fd);
    s.log_fd = -1;
  }
  std::string ts = timestamp();
  s.lines.feed(data, n, [&](std::string_view l, bool cut) { line(w, is_err, l, cut, ts); });
  terminal_.flush();
}

void OutputRouter::end(WorkerOutput& w, bool is_err) {
  std::string ts = timestamp();
  w.stream(is_err).lines.flush([&](std::string_view l, bool cut) { line(w, is_err, l, cut, ts); });
}

// The one place a whole line goes: the stderr tail, then (tagged) the terminal; a piece of a cut
// line carries the mark. The log files have the bytes as written.
void OutputRouter::line(WorkerOutput& w, bool is_err, std::string_view text, bool cut, const std::string& ts) {
  std::string marked;
  if (cut) {
    marked.reserve(text.size() + 80);
    marked.append(text).append(cut_mark(w.stream(is_err).lines.max_line()));
    text = marked;
  }
  if (is_err) {
    std::string kept = cut_line(text, kTailLineBytes);
    w.first_exception_.line(kept);
    w.last_err_.push_back(std::move(kept));
    if (w.last_err_.size() > kLastLines) w.last_err_.pop_front();
  }
  if (!w.to_terminal_ || (w.redirected_ & (is_err ? 2 : 1)) != 0) return;
  terminal_.line(is_err, ts, w.stream(is_err).tag, text);
}

}  // namespace dtrain::agent
