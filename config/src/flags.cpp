// Every flag of plan and launch, one row each (flags.hpp), and the readers of the rows whose text
// is not read by their target's type.
#include "dtrain/config/flags.hpp"

#include <fmt/format.h>

#include "dtrain/common/text.hpp"
#include "launch_internal.hpp"

namespace dtrain::config {
namespace {

using json = nlohmann::json;
using detail::FlagSink;
constexpr auto kTorchrun = FlagFamily::torchrun;
constexpr auto kMpirun = FlagFamily::mpirun;
constexpr auto kDtrain = FlagFamily::dtrain;
constexpr auto kValue = FlagKind::value;
constexpr auto kToggle = FlagKind::toggle;

// torchrun's --rdzv-endpoint may leave the port out: 29400 then.
void read_endpoint(const FlagRow& row, const std::string& text, FlagSink& sink) {
  bool bracketed = !text.empty() && text.front() == '[';
  bool has_port = bracketed ? text.find("]:") != std::string::npos
                            : (text.find(':') != std::string::npos && text.find(':') == text.rfind(':'));
  bool bare_v6 = !bracketed && text.find(':') != text.rfind(':');
  std::string ep = has_port || text.empty() ? text : bare_v6 ? fmt::format("[{}]:29400", text) : text + ":29400";
  sink.spec(row.target, ep);
}

// --rdzv-backend: c10d and static name the built-in rendezvous, etcd-v2 the etcd one.
void read_backend(const FlagRow& row, const std::string& text, FlagSink& sink) {
  std::string name = text == "c10d" || text == "static" ? "builtin" : text == "etcd-v2" ? "etcd" : text;
  sink.spec(row.target, name);
}

// clang-format off
constexpr FlagRow kRows[] = {
  // torchrun's flags (torch.distributed.run, 1.13 and 2.x)
  {"--nnodes,--nodes", "PET_NNODES", kValue, "/cluster/instances", "N",
   "number of nodes, N, or MIN:MAX for an elastic job (overrides cluster.instances, Slurm, SageMaker, torch env)", kTorchrun},
  {"--nproc-per-node", "PET_NPROC_PER_NODE", kValue, "nproc_per_node", "N",
   "workers per node: a count, gpu (one per GPU), cpu (one per CPU) or auto (GPUs if any, else CPUs); default: the "
   "spec's, or 1 without a job file", kTorchrun},
  {"--node-rank", "PET_NODE_RANK", kValue, "node_rank", "R", "this node's rank, 0 to nodes-1 (overrides the environment)", kTorchrun},
  {"--rdzv-backend", "PET_RDZV_BACKEND", kValue, "/rendezvous/backend", "NAME",
   "builtin (also c10d, static: dtrain's own rendezvous) or etcd (also etcd-v2: an etcd v3 cluster at "
   "--rdzv-endpoint); overrides rendezvous.backend", kTorchrun, read_backend},
  {"--rdzv-endpoint,--rdzv", "PET_RDZV_ENDPOINT", kValue, "/rendezvous/endpoint", "HOST:PORT",
   "rendezvous HOST[:PORT], port 29400 when left out (overrides rendezvous.endpoint)", kTorchrun, read_endpoint},
  {"--rdzv-id", "PET_RDZV_ID", kValue, "/rendezvous/run_id", "ID", "the run id every node shares (overrides rendezvous.run_id)", kTorchrun},
  {"--rdzv-conf", "PET_RDZV_CONF", kValue, "rdzv_conf", "K=V,...",
   "torchrun's KEY=VALUE,... rendezvous settings: join_timeout/timeout, last_call_timeout, heartbeat_timeout, "
   "keep_alive_interval, etcd cacert/cert/key (others: a note)", kTorchrun, detail::read_rdzv_conf},
  {"--standalone", "PET_STANDALONE", kToggle, "standalone", "",
   "one node with a rendezvous of its own (ignores the environment's nodes)", kTorchrun},
  {"--max-restarts", "PET_MAX_RESTARTS", kValue, "/restart/max_restarts", "N",
   "restarts of the whole group after a failure (overrides restart.max_restarts)", kTorchrun},
  {"--monitor-interval", "PET_MONITOR_INTERVAL", kValue, "monitor_interval", "SECONDS",
   "torchrun's polling period; accepted (dtrain hears of an exit at once)", kTorchrun},
  {"--start-method", "PET_START_METHOD", kValue, "start_method", "METHOD",
   "torchrun's spawn|fork|forkserver; accepted (dtrain always starts a new process)", kTorchrun},
  {"--role", "PET_ROLE", kValue, "role", "NAME", "the workers' ROLE_NAME (torchrun's; default: default)", kTorchrun},
  {"-m,--module", "PET_MODULE", kToggle, "module", "", "the program is a Python module, run as python -m MODULE (torchrun's)", kTorchrun},
  {"--no-python", "PET_NO_PYTHON", kToggle, "no_python", "", "run the program itself, not through the Python interpreter", kTorchrun},
  {"--run-path", "PET_RUN_PATH", kToggle, "run_path", "", "run the script by its path (torchrun's; what dtrain always does)", kTorchrun},
  {"--log-dir", "PET_LOG_DIR", kValue, "/output/log_dir", "DIR",
   "per-rank log files under DIR/RUN_ID/attempt-N/rank-R.{out,err} (overrides output.log_dir)", kTorchrun},
  {"-r,--redirects", "PET_REDIRECTS", kValue, "redirects", "N",
   "these streams go to the log files only, not the terminal: 0 none, 1 stdout, 2 stderr, 3 both, or "
   "LOCAL_RANK:N,...; keeps the logs", kTorchrun},
  {"-t,--tee", "PET_TEE", kValue, "tee", "N",
   "torchrun's: these streams also go to log files (they always do with a log folder): 0-3 or LOCAL_RANK:N,...; keeps "
   "the logs", kTorchrun},
  {"--local-ranks-filter", "PET_LOCAL_RANKS_FILTER", kValue, "local_ranks_filter", "LIST",
   "only these local ranks' output reaches the terminal, e.g. 0 or 0,1 (logs keep all)", kTorchrun},
  {"--master-addr", "PET_MASTER_ADDR", kValue, "master_addr", "ADDR",
   "node 0's address: MASTER_ADDR, and the rendezvous host when no endpoint is given (at port 29400)", kTorchrun},
  {"--master-port", "PET_MASTER_PORT", kValue, "master_port", "PORT",
   "MASTER_PORT of the workers, exactly (default: the exported MASTER_PORT, else a free port)", kTorchrun},
  {"--local-addr", "PET_LOCAL_ADDR", kValue, "/env/DTRAIN_SOCKET_ADDR", "ADDR",
   "the address this node's workers advertise to their peers (DTRAIN_SOCKET_ADDR; default: the one that reaches the "
   "rendezvous)", kTorchrun},
  {"--logs-specs", nullptr, kValue, "logs_specs", "NAME", "torchrun's LogsSpecs plugin; accepted (dtrain's own log layout)", kTorchrun},
  {"--numa-binding", nullptr, kValue, "numa_binding", "MODE", "torchrun's NUMA affinity; accepted (dtrain does not bind)", kTorchrun},
  {"--signals-to-handle", "PET_SIGNALS_TO_HANDLE", kValue, "signals_to_handle", "LIST",
   "torchrun's forwarded signals; accepted (dtrain forwards its own set)", kTorchrun},
  {"--event-log-handler", "PET_EVENT_LOG_HANDLER", kValue, "event_log_handler", "NAME",
   "torchrun's event handler; accepted (dtrain status and --summary-json report the events)", kTorchrun},
  {"--shutdown-timeout", "PET_SHUTDOWN_TIMEOUT", kValue, "/grace_s", "SECONDS",
   "torchrun's name of --grace: seconds between SIGTERM and SIGKILL when stopping workers (grace_s)", kTorchrun},

  // mpirun's words (-np, -ppn: one dash, several letters, as mpirun and Intel MPI write them)
  {"-n,-np", nullptr, kValue, "total_ranks", "N",
   "mpirun's -n/-np: the job's workers in all (the world size); with -ppn, --nproc-per-node or --nnodes the other "
   "count follows", kMpirun},
  {"--npernode,-ppn", nullptr, kValue, "nproc_per_node", "N", "mpirun's -ppn/--npernode: workers per node, as "
   "--nproc-per-node", kMpirun},
  {"-H,--host,--hosts,-host", nullptr, kValue, "hosts", "HOST[:N],...",
   "mpirun's -H: the job's hosts, node ranks in this order, N workers on each (a host without :N takes the job's "
   "workers per node); the first serves the rendezvous", kMpirun},
  {"--hostfile,--machinefile,-hostfile,-machinefile", nullptr, kValue, "hostfile", "FILE",
   "mpirun's and DeepSpeed's hostfile: a line per host, HOST slots=N (or HOST:N, or HOST: the job's workers per "
   "node), # comments; node ranks in its order", kMpirun},
  {"--bind-to", nullptr, kValue, "/cluster/cpu_bind", "none|core|numa",
   "mpirun's name of --cpu-bind (its none, core and numa)", kMpirun},

  // dtrain's own
  {"--spec", nullptr, kValue, "spec", "JOB.json", "job spec file that supplies what the flags and the program do not", kDtrain},
  {"--python", nullptr, kValue, "python", "PATH",
   "Python interpreter of a script or module, and of a job file's Python command (default: PYTHON_EXEC, else python3 "
   "on PATH)", kDtrain},
  {"--token-file", nullptr, kValue, "/rendezvous/token_file", "FILE",
   "file holding the rendezvous token (overrides rendezvous.token_file)", kDtrain},
  {"--insecure", nullptr, kToggle, "insecure", "", "allow a multi-node job without a rendezvous token (trusted networks only)", kDtrain},
  {"--set", nullptr, FlagKind::repeated, "set", "/PTR=VALUE",
   "set a spec field before validation; VALUE is JSON, else a string (repeatable)", kDtrain},
  {"--grace", nullptr, kValue, "/grace_s", "SECONDS",
   "seconds between SIGTERM and SIGKILL when stopping workers (overrides grace_s, 10)", kDtrain},
  {"--tag", nullptr, kToggle, "/output/tag", "", "prefix each output line with its rank (output.tag_format)", kDtrain},
  {"--no-tag", nullptr, kToggle, "/output/tag", "", "forward worker output lines without a prefix", kDtrain, nullptr, "false"},
  {"--timestamps", nullptr, kToggle, "/output/timestamps", "", "prefix each output line with the local time", kDtrain},
  {"--straggler-share", nullptr, kValue, "/output/straggler_share", "SHARE",
   "warn when one rank keeps the others waiting more than SHARE of the time, 0 to 1 (overrides "
   "output.straggler_share, 0.2; 0: never)", kDtrain},
  {"--ranks", nullptr, kValue, "ranks", "LIST", "only these ranks' output reaches the terminal, e.g. 0,3 or 0-3 (logs keep all)", kDtrain},
  {"--summary-json", nullptr, kValue, "summary_json", "FILE", "write the end-of-run summary as JSON to FILE", kDtrain},
  {"--launch-agent", nullptr, kValue, "launch_agent", "CMD",
   "the command that reaches each host of -H or --hostfile, with its own arguments (default: ssh; e.g. \"ssh -F "
   "cfg\")", kDtrain},
  {"--cpu-bind", nullptr, kValue, "/cluster/cpu_bind", "none|core|numa",
   "each local rank's CPUs: none (the default: unbound), core (its share of the cores) or numa (whole NUMA nodes, "
   "with GPUs its GPU's); one line per rank says what it got; overrides cluster.cpu_bind",
   kDtrain},
  {"--progress", nullptr, kToggle, "progress", "", "show the job's stage even when stderr is not a terminal", kDtrain},
  {"--no-progress", nullptr, kToggle, "progress", "", "never show the progress line", kDtrain, nullptr, "false"},
};
// clang-format on

}  // namespace

std::span<const FlagRow> flag_rows() { return kRows; }

std::vector<std::string> flag_names(const FlagRow& row) { return text::split(row.names, ','); }

std::string flag_name(const FlagRow& row) {
  auto names = flag_names(row);
  if (row.family == FlagFamily::mpirun) return names.front();  // -n, -H: mpirun's own spelling
  for (const auto& n : names)
    if (n.rfind("--", 0) == 0) return n;
  return names.front();
}

const FlagRow* find_flag(std::string_view name) {
  std::string dashed(name);
  if (dashed.rfind("--", 0) == 0)
    for (std::size_t i = 2; i < dashed.size(); ++i)
      if (dashed[i] == '_') dashed[i] = '-';
  for (const auto& row : kRows)
    for (const auto& n : flag_names(row))
      if (n == dashed) return &row;
  return nullptr;
}

std::vector<std::string> overridden_fields(const FlagRow& row) {
  if (row.target[0] == '/') return {row.target};
  std::vector<std::string> out;
  if (const auto* s = detail::find_setting(row.target))
    for (const auto& p : text::split(s->overrides, ' '))
      if (!p.empty()) out.push_back(p);
  return out;
}

}  // namespace dtrain::config
