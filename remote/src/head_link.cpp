// The head's words to a host's launch over its standard input (head_link.hpp).
#include "dtrain/remote/head_link.hpp"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/system.hpp"

namespace dtrain::remote {
namespace {

using json = nlohmann::json;

constexpr std::size_t kMaxHeader = 1 << 20;

std::optional<std::string>& token_slot() {
  static std::optional<std::string> t;
  return t;
}

// One line from fd 0, a byte at a time (what follows it is the watcher's); nullopt at EOF first.
std::optional<std::string> read_line(int fd, std::size_t limit) {
  std::string line;
  char c = 0;
  while (line.size() < limit) {
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line.empty() ? std::nullopt : std::optional<std::string>(line);
    if (c == '\n') return line;
    line.push_back(c);
  }
  return line;
}

int signal_named(std::string_view name) {
  if (name == "INT") return SIGINT;
  if (name == "TERM") return SIGTERM;
  if (name == "HUP") return SIGHUP;
  return 0;
}

bool travels(std::string_view name) {
  auto starts = [&](std::string_view p) { return name.substr(0, p.size()) == p; };
  if (name == "DTRAIN_RDZV_TOKEN") return false;
  return starts("DTRAIN_") || starts("PET_") || starts("NCCL_") || name == "PYTHONPATH";
}

}  // namespace

std::string encode_header(const HeadHeader& h) {
  json env = json::array();
  for (const auto& [k, v] : h.env) env.push_back({k, v});
  json j{{"token", h.token}, {"cwd", h.cwd}, {"words", h.words}, {"node_rank", h.node_rank}, {"env", env}};
  return j.dump() + "\n";
}

HeadHeader decode_header(std::string_view line) {
  HeadHeader h;
  try {
    json j = json::parse(line);
    h.token = j.at("token").get<std::string>();
    h.cwd = j.at("cwd").get<std::string>();
    h.words = j.at("words").get<std::vector<std::string>>();
    h.node_rank = j.at("node_rank").get<int>();
    for (const auto& kv : j.at("env")) h.env.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("dtrain __remote: standard input does not start with the head's header "
                                  "(this command is what dtrain launch -H runs on each host): {}", e.what()));
  }
  if (h.node_rank < 0) throw ConfigError("dtrain __remote: the header's node rank is negative");
  return h;
}

std::vector<std::pair<std::string, std::string>> head_env(char** env) {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || !travels(kv.substr(0, eq))) continue;
    out.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return out;
}

int node_main(int /*argc*/, char** argv, int (*run)(int, char**)) {
  HeadHeader h;
  try {
    auto line = read_line(STDIN_FILENO, kMaxHeader);
    if (!line) throw ConfigError("dtrain __remote: standard input ended before the head's header "
                                 "(this command is what dtrain launch -H runs on each host)");
    h = decode_header(*line);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (::chdir(h.cwd.c_str()) != 0) {
    const char* home = std::getenv("HOME");
    std::fprintf(stderr, "dtrain: warning: this host has no folder %s (%s); running in %s\n", h.cwd.c_str(),
                 std::strerror(errno), home != nullptr ? home : "the login folder");
  }
  for (const auto& [k, v] : h.env) ::setenv(k.c_str(), v.c_str(), 1);
  token_slot() = h.token;
  std::vector<std::string> args{argv[0], "launch", "--node-rank", std::to_string(h.node_rank)};
  args.insert(args.end(), h.words.begin(), h.words.end());
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  return run(static_cast<int>(args.size()), cargs.data());
}

const std::optional<std::string>& head_token() { return token_slot(); }

void tell_head_joined() {
  if (head_token()) agent::write_all(STDERR_FILENO, kJoinedLine);
}

void watch_head() {
  sys::AllSignalsBlocked blocked;  // the signals it raises are the agent's loop's to handle
  std::thread([] {
    for (;;) {
      auto line = read_line(STDIN_FILENO, 64);
      if (!line) break;
      if (int sig = signal_named(*line); sig != 0) ::kill(::getpid(), sig);
    }
    std::fprintf(stderr, "dtrain: the head of this launch is gone (its connection closed); stopping\n");
    ::kill(::getpid(), SIGTERM);
  }).detach();
}

}  // namespace dtrain::remote
