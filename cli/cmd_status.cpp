// dtrain status --rdzv ADDR:PORT [--token-file F] [--run-id ID] [--json] [--watch] [--interval S]:
// the nodes of a job as the rendezvous sees them, and with --stacks each node's ranks' Python
// stacks, which its agent dumps when asked through the rendezvous (run_status.hpp's query_stacks).
// Without --rdzv: the jobs this machine runs, rank by rank, with each worker's last collective and
// the ranks that are stuck (agent/hang.hpp), and with --stacks each rank's Python stack
// (agent/stacks.hpp).
#include <CLI/CLI.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "app.hpp"
#include "dtrain/agent/hang.hpp"
#include "dtrain/agent/stacks.hpp"
#include "dtrain/agent/straggler.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/progress_page.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"

namespace dtrain::cli {
namespace {

struct StatusArgs {
  std::string rdzv;
  std::string token_file;
  std::string run_id;
  bool json = false;
  bool watch = false;
  bool stacks = false;
  double interval_s = 2;
};

std::atomic<bool> g_interrupted{false};

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A JSON array of the strings `v`.
std::string json_strings(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += (s.empty() ? "" : ",") + json_escape(l);
  return "[" + s + "]";
}

// "[\"rank 0: ...\", ...]" of a node's progress text
std::string lines_json(const std::string& text) {
  std::string out;
  for (const auto& l : text::split(text, '\n'))
    if (!l.empty()) out += (out.empty() ? "" : ",") + json_escape(l);
  return "[" + out + "]";
}

// `progress`: what each node published (rdzv::query_progress), in the order of r.nodes
std::string run_json(const rdzv::RunStatus& r, const std::vector<std::string>& progress) {
  std::string nodes;
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    const auto& n = r.nodes[i];
    if (!nodes.empty()) nodes += ",";
    nodes += fmt::format(
        "{{\"node_rank\":{},\"host\":{},\"addr\":{},\"state\":{},\"slots\":{},\"workers_running\":{},"
        "\"workers_exited\":{},\"restarts\":{},\"heartbeat_age_s\":{:.1f},\"progress\":{}}}",
        n.node_rank, json_escape(n.host), json_escape(n.addr), json_escape(n.state), n.slots, n.running, n.exited,
        n.restarts, double(n.heartbeat_age_ms) / 1000.0, lines_json(i < progress.size() ? progress[i] : ""));
  }
  return fmt::format(
      "{{\"run_id\":{},\"generation\":{},\"instances\":{},\"joined\":{},\"complete\":{},\"world_size\":{},"
      "\"master_addr\":{},\"master_port\":{},\"root_cause\":{},\"nodes\":[{}]}}",
      json_escape(r.run_id), r.generation, r.instances, r.joined, r.closed ? "true" : "false", r.world_size,
      json_escape(r.master_addr), r.master_port, r.root_cause.empty() ? "null" : json_escape(r.root_cause), nodes);
}

std::string run_text(const rdzv::RunStatus& r, const std::vector<std::string>& progress) {
  std::string out = fmt::format("run {}  generation {}  nodes {}/{}", r.run_id, r.generation, r.joined, r.instances);
  if (r.closed) out += fmt::format("  world size {}  master {}:{}", r.world_size, r.master_addr, r.master_port);
  else out += "  (joining)";
  out += "\n";
  if (!r.root_cause.empty()) out += "root cause: " + r.root_cause + "\n";
  std::size_t hw = 4;
  for (const auto& n : r.nodes) hw = std::max(hw, n.host.size());
  out += fmt::format("{:<5} {:<{}} {:<9} {:>7} {:>6} {:>8}  {}\n", "NODE", "HOST", hw, "STATE", "RUNNING", "EXITED",
                     "RESTARTS", "HEARTBEAT");
  for (const auto& n : r.nodes) {
    std::string rank = n.node_rank >= 0 ? std::to_string(n.node_rank) : "-";
    out += fmt::format("{:<5} {:<{}} {:<9} {:>7} {:>6} {:>8}  {:.1f} s ago\n", rank, n.host, hw, n.state, n.running,
                       n.exited, n.restarts, double(n.heartbeat_age_ms) / 1000.0);
  }
  for (std::size_t i = 0; i < r.nodes.size() && i < progress.size(); ++i) {
    if (progress[i].empty()) continue;
    out += fmt::format("node {} ({}), at its last heartbeat:\n", r.nodes[i].node_rank, r.nodes[i].host);
    for (const auto& l : text::split(progress[i], '\n')) out += "  " + l + "\n";
  }
  return out;
}

// The status of one run and, once its nodes joined, where their ranks are.
std::pair<rdzv::RunStatus, std::vector<std::string>> run_of(const rdzv::ClientOptions& co, const std::string& id) {
  auto st = rdzv::query_status(co, id);
  std::vector<std::string> progress;
  if (st.closed) progress = rdzv::query_progress(co, st);
  return {st, progress};
}

// ---- --stacks --rdzv: each node's agent asked through the rendezvous ----

// How long `dtrain status --stacks --rdzv` waits for the nodes' answers (an agent's dump takes 2 s at most).
constexpr std::chrono::seconds kStacksWait{10};

struct NodeStacks {
  int node_rank = -1;
  std::string host;
  std::optional<agent::StacksText> stacks;
  std::string none;  // why there is no answer
};

std::vector<NodeStacks> ask_stacks(const rdzv::ClientOptions& co, const rdzv::RunStatus& st) {
  std::vector<NodeStacks> out;
  std::vector<int> ask;
  for (const auto& n : st.nodes) {
    if (n.node_rank < 0) continue;
    out.push_back({n.node_rank, n.host, std::nullopt, ""});
    if (n.state == "lost" || n.state == "done") out.back().none = fmt::format("not asked: the node is {}", n.state);
    else ask.push_back(n.node_rank);
  }
  auto answers = rdzv::query_stacks(co, st, ask, kStacksWait);
  for (std::size_t i = 0, j = 0; i < out.size(); ++i) {
    if (!out[i].none.empty()) continue;
    if (answers[j]) out[i].stacks = agent::unpack_stacks(*answers[j]);
    else out[i].none = fmt::format("no answer within {} s (its agent is stopped, busy or gone)", kStacksWait.count());
    ++j;
  }
  return out;
}

std::string stacks_text(const std::vector<NodeStacks>& nodes) {
  std::string out;
  for (const auto& n : nodes) {
    if (!n.stacks) {
      out += fmt::format("node {} ({}): Python stacks: {}\n", n.node_rank, n.host, n.none);
      continue;
    }
    out += fmt::format("node {} ({}), Python stacks (each rank's main thread; all threads below):\n", n.node_rank, n.host);
    for (const auto& l : n.stacks->summary) out += "    " + l + "\n";
    for (const auto& l : n.stacks->lines) out += "  " + l + "\n";
  }
  return out;
}

// "[{\"node_rank\":0,\"host\":...,\"answered\":true,\"summary\":[...],\"stacks\":[...]},...]"
std::string stacks_json(const std::vector<NodeStacks>& nodes) {
  std::string out;
  for (const auto& n : nodes) {
    out += fmt::format("{}{{\"node_rank\":{},\"host\":{},\"answered\":{},", out.empty() ? "" : ",", n.node_rank,
                       json_escape(n.host), n.stacks ? "true" : "false");
    out += n.stacks ? fmt::format("\"summary\":{},\"stacks\":{}}}", json_strings(n.stacks->summary),
                                  json_strings(n.stacks->lines))
                    : fmt::format("\"why\":{}}}", json_escape(n.none));
  }
  return "[" + out + "]";
}

// ---- this machine's jobs ----

std::string local_snapshot(const StatusArgs& a) {
  std::string out, items;
  for (const auto& run : agent::local_runs()) {
    if (!a.run_id.empty() && run.run_id != a.run_id) continue;
    auto pages = agent::read_progress(run.run_dir);
    for (auto& p : pages) {  // a stopped or zombie rank says so on its line
      p.pid = p.page.valid ? p.page.pid : 0;
      p.state = agent::process_state(p.pid);
    }
    auto d = agent::diagnose(pages, progress::now_ns(), run.hang_timeout_s.value_or(agent::kStuckAfterS));
    auto stragglers = agent::straggler::read_report(run.run_dir);
    std::vector<agent::RankStack> stacks;
    if (a.stacks) {
      std::vector<int> ranks;
      for (const auto& p : pages) ranks.push_back(p.rank);
      stacks = agent::dump_stacks(run.run_dir, ranks);
    }
    if (a.json) {
      std::string unseen;
      for (int r : d.unseen) unseen += (unseen.empty() ? "" : ",") + std::to_string(r);
      items += fmt::format("{}{{\"run_id\":{},\"node_rank\":{},\"pid\":{},\"run_dir\":{},\"stuck\":{},"
                           "\"verdict\":{},\"unseen_ranks\":[{}],\"ranks\":", items.empty() ? "" : ",",
                           json_escape(run.run_id), run.node_rank, run.pid, json_escape(run.run_dir),
                           d.hung ? "true" : "false", json_escape(d.verdict), unseen);
      items += json_strings(d.lines) + ",\"stragglers\":" + json_strings(stragglers);
      if (a.stacks) items += ",\"stacks\":" + json_strings(agent::stack_lines(stacks));
      items += "}";
      continue;
    }
    out += fmt::format("{}run {}  node {}  agent pid {}  ({})\n", out.empty() ? "" : "\n", run.run_id, run.node_rank,
                       run.pid, run.run_dir);
    for (const auto& l : d.lines) out += "  " + l + "\n";
    if (!d.unseen.empty()) out += "  " + agent::unseen_text(d) + "\n";
    if (d.hung) out += "  stuck: " + d.verdict + "\n";
    for (const auto& l : stragglers) out += "  " + l + "\n";
    if (!a.stacks) continue;
    out += "  Python stacks (each rank's main thread; all threads below):\n";
    for (const auto& l : agent::stack_summary(stacks)) out += "    " + l + "\n";
    for (const auto& l : agent::stack_lines(stacks)) out += "  " + l + "\n";
  }
  if (a.json) return "{\"runs\":[" + items + "]}\n";
  return out.empty() ? "no dtrain job runs on this machine (for this user)\n" : out;
}

std::string snapshot(const StatusArgs& a, const rdzv::ClientOptions& co) {
  if (a.rdzv.empty()) return local_snapshot(a);
  std::vector<std::string> runs;
  if (!a.run_id.empty()) runs.push_back(a.run_id);
  else runs = rdzv::list_runs(co);
  std::string out;
  if (a.json) {
    std::string items;
    for (const auto& id : runs) {
      auto [st, progress] = run_of(co, id);
      std::string item = run_json(st, progress);
      if (a.stacks && st.closed) item.insert(item.size() - 1, ",\"node_stacks\":" + stacks_json(ask_stacks(co, st)));
      items += (items.empty() ? "" : ",") + item;
    }
    return "{\"rendezvous\":" + json_escape(a.rdzv) + ",\"runs\":[" + items + "]}\n";
  }
  if (runs.empty()) return fmt::format("no job has joined the rendezvous at {} yet\n", a.rdzv);
  for (const auto& id : runs) {
    auto [st, progress] = run_of(co, id);
    out += (out.empty() ? "" : "\n") +
           (st.instances == 0 ? fmt::format("run {}: no node has joined\n", id) : run_text(st, progress));
    if (a.stacks && st.closed) out += stacks_text(ask_stacks(co, st));
  }
  return out;
}

int status(const StatusArgs& a) {
  if (a.interval_s <= 0) throw ConfigError(fmt::format("--interval {}: must be positive", a.interval_s));
  rdzv::ClientOptions co;
  if (!a.rdzv.empty()) {
    auto hp = net::parse_host_port(a.rdzv, "--rdzv");
    co.host = hp.host;
    co.port = hp.port;
    co.token = rdzv::auth::resolve_token(a.token_file);
  }
  co.run_id = a.run_id;
  co.client_name = "dtrain status";
  co.connect_timeout = std::chrono::milliseconds(5000);
  try {
    if (!a.watch) {
      std::string s = snapshot(a, co);
      std::fwrite(s.data(), 1, s.size(), stdout);
      return exit_code::ok;
    }
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_interrupted = true; };
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    bool tty = ::isatty(STDOUT_FILENO) != 0;
    while (!g_interrupted) {
      std::string s = snapshot(a, co);
      if (tty && !a.json) s = "\033[H\033[2J" + s;
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::int64_t(a.interval_s * 1000));
      while (!g_interrupted && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return exit_code::ok;
  } catch (const AuthError& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    return exit_code::auth_refused;
  } catch (const IoError& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    return exit_code::node_lost;
  }
}

}  // namespace

void register_status(CLI::App& app, Runner& run) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* sub = app.add_subcommand("status", "show the jobs of this machine rank by rank (stuck ranks and where), "
                                               "or with --rdzv the nodes of a job as its rendezvous sees them");
  sub->add_option("--rdzv", args->rdzv, "ADDR:PORT of the rendezvous (default: the jobs running on this machine)");
  sub->add_option("--token-file", args->token_file,
                  "file whose first line is the shared token (default: DTRAIN_RDZV_TOKEN)");
  sub->add_option("--run-id", args->run_id, "show only this run (default: every run the rendezvous knows)");
  sub->add_flag("--json", args->json, "print one JSON object instead of a table");
  sub->add_flag("--watch", args->watch, "refresh until interrupted");
  sub->add_flag("--stacks", args->stacks,
                "also show each rank's Python stack, all threads (with --rdzv: every node's, its agent asked "
                "through the rendezvous; a native rank: \"no stack\")");
  sub->add_option("--interval", args->interval_s, "seconds between refreshes with --watch")->capture_default_str();
  sub->callback([args, &run] { run = [args] { return status(*args); }; });
}

}  // namespace dtrain::cli
