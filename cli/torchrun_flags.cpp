// torchrun's flags on the command lines of plan and launch (torchrun_flags.hpp).
#include "torchrun_flags.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace dtrain::cli {
namespace {

// clang-format off
constexpr TorchrunFlag kFlags[] = {
  {"--nnodes", nullptr, "PET_NNODES", true, "/cluster/instances", false},
  {"--nproc-per-node", nullptr, "PET_NPROC_PER_NODE", true,
   "/cluster/gpus_per_instance /cluster/procs_per_instance /cluster/instance_type", false},
  {"--node-rank", nullptr, "PET_NODE_RANK", true, "", false},
  {"--rdzv-backend", nullptr, "PET_RDZV_BACKEND", true, "/rendezvous/backend", false},
  {"--rdzv-endpoint", nullptr, "PET_RDZV_ENDPOINT", true, "/rendezvous/endpoint", false},
  {"--rdzv-id", nullptr, "PET_RDZV_ID", true, "/rendezvous/run_id", false},
  {"--rdzv-conf", nullptr, "PET_RDZV_CONF", true, "", false},
  {"--standalone", nullptr, "PET_STANDALONE", false, "/rendezvous/endpoint", false},
  {"--max-restarts", nullptr, "PET_MAX_RESTARTS", true, "/restart/max_restarts", false},
  {"--monitor-interval", nullptr, "PET_MONITOR_INTERVAL", true, "", false},
  {"--start-method", nullptr, "PET_START_METHOD", true, "", false},
  {"--role", nullptr, "PET_ROLE", true, "", false},
  {"--module", "-m", "PET_MODULE", false, "", true},
  {"--no-python", nullptr, "PET_NO_PYTHON", false, "", true},
  {"--run-path", nullptr, "PET_RUN_PATH", false, "", true},
  {"--log-dir", nullptr, "PET_LOG_DIR", true, "/output/log_dir", false},
  {"--redirects", "-r", "PET_REDIRECTS", true, "", false},
  {"--tee", "-t", "PET_TEE", true, "", false},
  {"--local-ranks-filter", nullptr, "PET_LOCAL_RANKS_FILTER", true, "", false},
  {"--master-addr", nullptr, "PET_MASTER_ADDR", true, "", false},
  {"--master-port", nullptr, "PET_MASTER_PORT", true, "", false},
  {"--local-addr", nullptr, "PET_LOCAL_ADDR", true, "/env/DTRAIN_SOCKET_ADDR", false},
  {"--logs-specs", nullptr, nullptr, true, "", false},
  {"--numa-binding", nullptr, nullptr, true, "", false},
  {"--signals-to-handle", nullptr, "PET_SIGNALS_TO_HANDLE", true, "", false},
  {"--event-log-handler", nullptr, "PET_EVENT_LOG_HANDLER", true, "", false},
};
// clang-format on

using Notes = std::vector<std::string>;

// A torchrun flag dtrain accepts but does not need: a note of what it does instead.
void add_noted(CLI::App* sub, const char* name, const char* type, std::string help, Notes& notes,
               std::function<std::string(const std::string&)> note) {
  sub->add_option_function<std::string>(
         name, [&notes, note = std::move(note), name](const std::string& v) {
           std::string why = note(v);
           notes.push_back(fmt::format("{} {}: {}", name, v, why));
         },
         std::move(help))
      ->type_name(type);
}

void add_noted_options(CLI::App* sub, SpecArgs& a) {
  auto& o = a.overrides;
  auto& notes = a.notes;
  add_noted(sub, "--monitor-interval", "SECONDS", "torchrun's polling period; accepted (dtrain hears of an exit at once)",
            notes, [&o](const std::string& v) -> std::string {
              try {
                std::size_t pos = 0;
                double x = std::stod(v, &pos);
                if (pos == v.size() && x > 0) return "not used; dtrain hears of a worker's exit at once (SIGCHLD), it does not poll";
              } catch (const std::logic_error&) {
              }
              o.flag_problems.push_back({"--monitor-interval", fmt::format("'{}' is not a number of seconds > 0", v)});
              return "refused";
            });
  add_noted(sub, "--start-method", "METHOD", "torchrun's spawn|fork|forkserver; accepted (dtrain always starts a new process)",
            notes, [&o](const std::string& v) -> std::string {
              if (v != "spawn" && v != "fork" && v != "forkserver")
                o.flag_problems.push_back({"--start-method", fmt::format("'{}' is not spawn, fork or forkserver", v)});
              return "not used; every worker is a process of its own, started with exec (as spawn)";
            });
  add_noted(sub, "--logs-specs", "NAME", "torchrun's LogsSpecs plugin; accepted (dtrain's own log layout)", notes,
            [](const std::string&) -> std::string {
              return "not used; logs go to LOG_DIR/RUN_ID/attempt-N/rank-R.{out,err} (--log-dir)";
            });
  add_noted(sub, "--numa-binding", "MODE", "torchrun's NUMA affinity; accepted (dtrain does not bind)", notes,
            [](const std::string&) -> std::string {
              return "not used; dtrain does not bind workers to NUMA nodes (run the command under numactl to)";
            });
  add_noted(sub, "--signals-to-handle", "LIST", "torchrun's forwarded signals; accepted (dtrain forwards its own set)",
            notes, [](const std::string&) -> std::string {
              return "not used; dtrain forwards SIGINT, SIGTERM, SIGHUP (stopping the job) and SIGUSR1, SIGUSR2 (as they "
                     "are) to every worker";
            });
  add_noted(sub, "--event-log-handler", "NAME", "torchrun's event handler; accepted (dtrain status and --summary-json "
                                                "report the events)",
            notes, [](const std::string&) -> std::string {
              return "not used; the job's events are in dtrain status and --summary-json";
            });
}

}  // namespace

std::span<const TorchrunFlag> torchrun_flags() { return kFlags; }

void add_torchrun_options(CLI::App* sub, SpecArgs& a) {
  auto& o = a.overrides;
  sub->add_option_function<std::string>("--nnodes,--nodes", [&o](const std::string& v) { config::set_nnodes(o, v); },
                                        "number of nodes, N, or MIN:MAX for an elastic job (overrides "
                                        "cluster.instances, Slurm, SageMaker, torch env)")
      ->type_name("N");
  sub->add_option_function<std::string>("--nproc-per-node", [&o](const std::string& v) { config::set_nproc_per_node(o, v); },
                                        "workers per node: a count, gpu (one per GPU), cpu (one per CPU) or auto "
                                        "(GPUs if any, else CPUs); default: the spec's, or 1 without a job file")
      ->type_name("N");
  sub->add_option_function<int>("--node-rank", [&o](const int& v) { o.node_rank = v; },
                                "this node's rank, 0 to nodes-1 (overrides the environment)")
      ->type_name("R");
  sub->add_flag("--standalone", o.standalone, "one node with a rendezvous of its own (ignores the environment's nodes)");
  sub->add_option_function<std::string>("--rdzv-endpoint,--rdzv", [&o](const std::string& v) { o.rdzv = v; },
                                        "rendezvous HOST[:PORT], port 29400 when left out (overrides "
                                        "rendezvous.endpoint)")
      ->type_name("HOST:PORT");
  sub->add_option_function<std::string>("--rdzv-id", [&o](const std::string& v) { o.run_id = v; },
                                        "the run id every node shares (overrides rendezvous.run_id)")
      ->type_name("ID");
  sub->add_option_function<std::string>(
         "--rdzv-backend", [&o](const std::string& v) { config::set_rdzv_backend(o, v); },
         "builtin (also c10d, static: dtrain's own rendezvous) or etcd (also etcd-v2: an etcd v3 cluster at "
         "--rdzv-endpoint); overrides rendezvous.backend")
      ->type_name("NAME");
  sub->add_option_function<std::string>(
         "--rdzv-conf", [&a](const std::string& v) { config::set_rdzv_conf(a.overrides, v, a.notes); },
         "torchrun's KEY=VALUE,... rendezvous settings: join_timeout/timeout, last_call_timeout, heartbeat_timeout, "
         "keep_alive_interval, etcd cacert/cert/key (others: a note)")
      ->type_name("K=V,...");
  sub->add_option_function<std::string>("--master-addr", [&o](const std::string& v) { o.master_addr = v; },
                                        "node 0's address: MASTER_ADDR, and the rendezvous host when no endpoint "
                                        "is given (at port 29400)")
      ->type_name("ADDR");
  sub->add_option_function<int>("--master-port", [&o](const int& v) { o.master_port = v; },
                                "MASTER_PORT of the workers, exactly (default: the exported MASTER_PORT, else a "
                                "free port)")
      ->type_name("PORT");
  sub->add_option_function<int>("--max-restarts", [&o](const int& v) { o.max_restarts = v; },
                                "restarts of the whole group after a failure (overrides restart.max_restarts)")
      ->type_name("N");
  sub->add_option_function<std::string>("--local-addr",
                                        [&o](const std::string& v) {
                                          o.flag_sets.push_back({"/env/DTRAIN_SOCKET_ADDR", v, true, "--local-addr"});
                                        },
                                        "the address this node's workers advertise to their peers "
                                        "(DTRAIN_SOCKET_ADDR; default: the one that reaches the rendezvous)")
      ->type_name("ADDR");
  sub->add_option_function<std::string>("--log-dir",
                                        [&o](const std::string& v) {
                                          o.flag_sets.push_back({"/output/log_dir", v, true, "--log-dir"});
                                        },
                                        "per-rank log files under DIR/RUN_ID/attempt-N/rank-R.{out,err} (overrides "
                                        "output.log_dir)")
      ->type_name("DIR");
  auto& r = a.run;
  sub->add_option("--role", r.role, "the workers' ROLE_NAME (torchrun's; default: default)")->type_name("NAME");
  sub->add_option("-r,--redirects", r.redirects, "these streams go to the log files only, not the terminal: 0 none, "
                                                 "1 stdout, 2 stderr, 3 both, or LOCAL_RANK:N,...; keeps the logs")
      ->type_name("N");
  sub->add_option("-t,--tee", r.tee, "torchrun's: these streams also go to log files (they always do with a log "
                                     "folder): 0-3 or LOCAL_RANK:N,...; keeps the logs")
      ->type_name("N");
  sub->add_option("--local-ranks-filter", r.local_ranks_filter,
                  "only these local ranks' output reaches the terminal, e.g. 0 or 0,1 (logs keep all)")
      ->type_name("LIST");
  add_noted_options(sub, a);
}

void add_run_options(CLI::App* sub, SpecArgs& a) {
  auto& o = a.overrides;
  auto& r = a.run;
  sub->add_option_function<std::string>("--grace",
                                        [&o](const std::string& v) { o.flag_sets.push_back({"/grace_s", v, false, "--grace"}); },
                                        "seconds between SIGTERM and SIGKILL when stopping workers (overrides grace_s, 10)")
      ->type_name("SECONDS");
  auto* tag = sub->add_flag_callback("--tag", [&o] { o.flag_sets.push_back({"/output/tag", "true", false, "--tag"}); },
                                     "prefix each output line with its rank (output.tag_format)");
  sub->add_flag_callback("--no-tag", [&o] { o.flag_sets.push_back({"/output/tag", "false", false, "--no-tag"}); },
                         "forward worker output lines without a prefix")
      ->excludes(tag);
  sub->add_flag_callback("--timestamps",
                         [&o] { o.flag_sets.push_back({"/output/timestamps", "true", false, "--timestamps"}); },
                         "prefix each output line with the local time");
  sub->add_option("--ranks", r.ranks, "only these ranks' output reaches the terminal, e.g. 0,3 or 0-3 (logs keep all)")
      ->type_name("LIST");
  sub->add_option("--summary-json", r.summary_json, "write the end-of-run summary as JSON to FILE")->type_name("FILE");
  auto* prog = sub->add_flag("--progress", r.progress, "show the job's stage even when stderr is not a terminal");
  sub->add_flag("--no-progress", r.no_progress, "never show the progress line")->excludes(prog);
}

}  // namespace dtrain::cli
