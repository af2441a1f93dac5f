// A failed worker's own words (failure_report.hpp).
#include "failure_report.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>
#include <sstream>

namespace dtrain::agent {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kErrorFileMax = 1 << 20;  // an error file larger than this is not torch's

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

// Head and tail of a long list, with the count of what is left out between them.
std::vector<std::string> bounded(std::vector<std::string> lines, std::size_t head, std::size_t tail) {
  if (lines.size() <= head + tail + 1) return lines;
  std::vector<std::string> out(lines.begin(), lines.begin() + long(head));
  out.push_back(fmt::format("... ({} lines left out)", lines.size() - head - tail));
  out.insert(out.end(), lines.end() - long(tail), lines.end());
  return out;
}

bool indented(std::string_view l) { return !l.empty() && (l[0] == ' ' || l[0] == '\t'); }

std::string find_in_path(const std::string& name, const std::string& path_var, const fs::path& workdir) {
  if (name.find('/') != std::string::npos) {
    fs::path p = fs::path(name).is_absolute() ? fs::path(name) : workdir / name;
    return ::access(p.c_str(), X_OK) == 0 ? p.lexically_normal().string() : "";
  }
  std::size_t start = 0;
  while (start <= path_var.size()) {
    auto colon = path_var.find(':', start);
    std::string dir = path_var.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    fs::path p = (dir.empty() ? workdir : fs::path(dir).is_absolute() ? fs::path(dir) : workdir / dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0) return p.lexically_normal().string();
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return "";
}

bool is_python_name(const std::string& path) {
  std::string base = fs::path(path).filename().string();
  return base.rfind("python", 0) == 0 || base.rfind("pypy", 0) == 0;
}

// The exception line a failure ends with: the error file's message, else the last line of the
// first exception, else the last stderr line that looks like one.
std::string exception_line(const WorkerExit& w) {
  if (w.error) return w.error->message;
  if (!w.first_exception.empty()) return w.first_exception.back();
  for (auto it = w.last_stderr.rbegin(); it != w.last_stderr.rend(); ++it)
    if (it->find("Error: ") != std::string::npos) return *it;
  return "";
}

}  // namespace

void FirstException::line(std::string_view text) {
  if (state_ == State::done) return;
  static constexpr std::string_view kHeader = "Traceback (most recent call last):";
  if (state_ == State::waiting) {
    // a tagged or prefixed line still counts ("[rank 1] Traceback ..."): find the header anywhere
    if (text.find(kHeader) == std::string_view::npos) return;
    state_ = State::in_block;
    head_.emplace_back(text);
    return;
  }
  // A header inside the block is no exception line: the block goes on to the real one. Headers
  // before any frame (printed again and again) are counted, not kept.
  const bool header = text.ends_with(kHeader);
  if (header && head_.size() == 1 && tail_.empty()) {
    ++repeated_headers_;
    return;
  }
  if (head_.size() < kHead) head_.emplace_back(text);
  else {
    tail_.emplace_back(text);
    if (tail_.size() > kTail) {
      tail_.erase(tail_.begin());
      ++skipped_;
    }
  }
  if (!header && !indented(text) && !text.empty()) state_ = State::done;  // the exception line
}

std::vector<std::string> FirstException::lines() const {
  std::vector<std::string> out = head_;
  if (repeated_headers_ > 0)
    out.insert(out.begin() + 1, fmt::format("... ({} more \"Traceback\" header lines left out)", repeated_headers_));
  if (skipped_ > 0) out.push_back(fmt::format("... ({} lines left out)", skipped_));
  out.insert(out.end(), tail_.begin(), tail_.end());
  return out;
}

std::optional<ErrorReport> read_error_file(const fs::path& path) {
  std::error_code ec;
  if (path.empty() || !fs::is_regular_file(path, ec) || fs::file_size(path, ec) > kErrorFileMax) return std::nullopt;
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("message")) return std::nullopt;
  ErrorReport r;
  r.file = path.string();
  const auto& m = j["message"];
  if (m.is_string()) {
    r.message = m.get<std::string>();
  } else if (m.is_object()) {
    if (m.contains("message") && m["message"].is_string()) r.message = m["message"].get<std::string>();
    if (m.contains("extraInfo") && m["extraInfo"].is_object()) {
      const auto& x = m["extraInfo"];
      if (x.contains("py_callstack") && x["py_callstack"].is_string()) r.traceback = x["py_callstack"].get<std::string>();
      if (x.contains("timestamp") && x["timestamp"].is_string()) r.timestamp = x["timestamp"].get<std::string>();
    }
  } else {
    return std::nullopt;
  }
  if (r.message.empty() && r.traceback.empty()) return std::nullopt;
  return r;
}

fs::path prepare_error_file(const fs::path& attempt_dir, int rank) {
  fs::path dir = attempt_dir / std::to_string(rank);
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path file = dir / "error.json";
  fs::remove(file, ec);  // a file of an earlier run would be taken for this one's
  return file;
}

std::optional<int> peer_failure_in(std::string_view text, int own_rank) {
  // dtrain's collectives: "rank 3 (pid 9) died", "rank 2 (address A, port P) closed the connection",
  // "rank 0 failed: ...", "rank 1 destroyed its communicator", "... connection broke while ..."
  static const std::regex named(
      R"(rank (\d+)(?: \([^()]*\))? (?:died|closed the connection|destroyed its communicator|failed:|connection broke))");
  static const std::regex unnamed(
      R"(peer failure \(4\)|\[peer \(4\)\]|Connection closed by peer|Connection reset by peer|abandoned because)");
  std::optional<int> found;
  const std::string s(text);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), named); it != std::sregex_iterator(); ++it) {
    int r = std::stoi((*it)[1].str());
    if (r != own_rank) found = r;  // the last one named is the end of a chain of reports
  }
  if (found) return found;
  if (std::regex_search(s, unnamed)) return -1;
  return std::nullopt;
}

std::string python_interpreter(const std::vector<std::string>& command, const std::string& path_var,
                               const fs::path& workdir) {
  if (command.empty()) return "";
  std::string prog = find_in_path(command[0], path_var, workdir);
  if (prog.empty()) return is_python_name(command[0]) ? command[0] : "";
  if (is_python_name(prog)) return prog;
  std::ifstream in(prog);
  std::string first;
  if (!std::getline(in, first) || first.rfind("#!", 0) != 0) return "";
  std::istringstream words(first.substr(2));
  std::string interp, arg;
  words >> interp >> arg;
  if (fs::path(interp).filename() == "env" && !arg.empty()) {
    std::string p = find_in_path(arg, path_var, workdir);
    return is_python_name(arg) ? (p.empty() ? arg : p) : "";
  }
  return is_python_name(interp) ? interp : "";
}

void explain(WorkerExit& w, const std::string& interpreter) {
  if (!w.error_file.empty() && !w.error) w.error = read_error_file(w.error_file);
  // a worker killed by a signal failed on its own, whatever it had printed before
  if (w.signal == 0 && !w.peer_failure && w.hang.empty()) {
    std::string text;
    if (w.error) text += w.error->message + "\n" + w.error->traceback + "\n";
    for (const auto& l : w.first_exception) text += l + "\n";
    for (const auto& l : w.last_stderr) text += l + "\n";
    w.peer_failure = peer_failure_in(text, w.rank);
  }
  std::string ex = exception_line(w);
  bool no_module = ex.find("ModuleNotFoundError") != std::string::npos ||
                   ex.find("ImportError: No module named") != std::string::npos;
  if (no_module && w.hint.empty()) {
    w.hint = interpreter.empty()
                 ? "a Python module is missing for the interpreter that ran the worker; pick the Python that "
                   "has it with --python PATH (or PYTHON_EXEC=PATH)"
                 : fmt::format("the worker ran the interpreter {}, which lacks that module; pick the Python that "
                               "has it with --python PATH (or PYTHON_EXEC=PATH)",
                               interpreter);
  }
}

Evidence evidence_of(const WorkerExit& w) {
  if (w.remote && !w.report.empty())
    return {w.report.front(), std::vector<std::string>(w.report.begin() + 1, w.report.end())};
  if (w.error) {
    // the traceback ends with the exception's line: the message alone when there is none
    auto lines = w.error->traceback.empty() ? split_lines(w.error->message) : split_lines(w.error->traceback);
    return {fmt::format("its error file ({})", w.error->file),
            bounded(std::move(lines), FirstException::kHead, FirstException::kTail)};
  }
  if (!w.first_exception.empty()) return {"first exception on its stderr", w.first_exception};
  if (!w.last_stderr.empty()) return {"last lines of its stderr", w.last_stderr};
  return {};
}

}  // namespace dtrain::agent
