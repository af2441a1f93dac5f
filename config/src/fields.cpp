// The job spec field registry (man/dtrain-job.5 documents every row; tests/docs checks it).
#include "dtrain/config/fields.hpp"

#include <array>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/worker_env.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/instance_types.hpp"
#include "dtrain/config/layout.hpp"
#include "spec_internal.hpp"

namespace dtrain::config {
namespace {

using json = nlohmann::json;
using Problems = std::vector<SpecProblem>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

void check_identifier(const json& v, const std::string& path, Problems& out, const char* what) {
  const auto& s = v.get_ref<const std::string&>();
  bool ok = s.size() <= 128 && is_name_char(s.front()) && s.front() != '.' && s.front() != '-';
  for (char c : s) ok = ok && is_name_char(c);
  if (!ok)
    out.push_back({path, fmt::format("{} is not a valid {}; expected up to 128 letters, digits, '.', '_' "
                                     "or '-', starting with a letter or digit",
                                     detail::show(v), what)});
}

void check_name(const json& v, const std::string& path, Problems& out) { check_identifier(v, path, out, "job name"); }
void check_run_id(const json& v, const std::string& path, Problems& out) { check_identifier(v, path, out, "run id"); }

void check_command(const json& v, const std::string& path, Problems& out) {
  if (v.empty()) {
    out.push_back({path, "[] is empty; expected the program and its arguments, e.g. [\"python3\", \"train.py\"]"});
    return;
  }
  if (v.front().is_string() && v.front().get_ref<const std::string&>().empty())
    out.push_back({path + "/0", "\"\" is empty; expected the program to run, e.g. \"python3\""});
}

void check_endpoint(const json& v, const std::string& path, Problems& out) {
  try {
    (void)net::parse_host_port(v.get_ref<const std::string&>(), path);
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    // parse_host_port prefixes the name we gave it: "<path>: ..."
    if (msg.rfind(path + ": ", 0) == 0) msg.erase(0, path.size() + 2);
    out.push_back({path, msg});
  }
}

void check_env(const json& v, const std::string& path, Problems& out) {
  for (const auto& [key, value] : v.items()) {
    std::string p = path + "/" + key;
    bool ok = !key.empty() && !(key[0] >= '0' && key[0] <= '9');
    for (char c : key) ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok) out.push_back({p, fmt::format("\"{}\" is not a valid environment variable name; expected letters, "
                                           "digits and '_', not starting with a digit", key)});
    else if (worker_env::is_reserved(key))
      out.push_back({p, fmt::format("{} is set by dtrain for every worker (see dtrain-launch(1)); remove it from env", key)});
    if (!value.is_string())
      out.push_back({p, fmt::format("{} is not a string; environment values are strings, e.g. \"{}\"", detail::show(value),
                                    value.is_primitive() && !value.is_null() ? detail::show(value) : std::string("4"))});
  }
}

void check_tag_format(const json& v, const std::string& path, Problems& out) {
  static const std::vector<std::string> fields = {"node", "rank", "local_rank", "stream"};
  const auto& s = v.get_ref<const std::string&>();
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') { ++i; continue; }
      out.push_back({path, fmt::format("\"{}\" has an unmatched '}}'; write '}}}}' for a literal brace", s)});
      return;
    }
    if (s[i] != '{') continue;
    if (i + 1 < s.size() && s[i + 1] == '{') { ++i; continue; }
    auto close = s.find('}', i);
    if (close == std::string::npos) {
      out.push_back({path, fmt::format("\"{}\" has an unclosed '{{'; fields are {{node}} {{rank}} {{local_rank}} {{stream}}", s)});
      return;
    }
    std::string name = s.substr(i + 1, close - i - 1);
    if (std::find(fields.begin(), fields.end(), name) == fields.end()) {
      auto near = text::closest(name, fields);
      out.push_back({path, fmt::format("\"{}\" uses unknown field {{{}}}{}; fields are {{node}} {{rank}} {{local_rank}} {{stream}}",
                                       s, name, near ? fmt::format(" (did you mean {{{}}}?)", *near) : "")});
    }
    i = close;
  }
}

void check_order(const json& v, const std::string& path, Problems& out) {
  std::array<GroupKind, 3> order{};
  if (!parse_order(v.get_ref<const std::string&>(), order))
    out.push_back({path, fmt::format("{} is not a rank order; expected tp, dp and pp once each, fastest first, "
                                     "e.g. \"tp-dp-pp\" (Megatron-LM's)", detail::show(v))});
}

void check_backend(const json& v, const std::string& path, Problems& out) {
  const auto& s = v.get_ref<const std::string&>();
  if (s != "builtin" && s != "etcd")
    out.push_back({path, fmt::format("{} is not a rendezvous backend; expected \"builtin\" (dtrain's own store, served "
                                     "by node 0's agent or `dtrain rendezvous serve`) or \"etcd\" (an etcd v3 "
                                     "cluster at rendezvous.endpoint)", detail::show(v))});
}

void check_schedule(const json& v, const std::string& path, Problems& out) {
  const auto& s = v.get_ref<const std::string&>();
  if (s != "gpipe" && s != "1f1b")
    out.push_back({path, fmt::format("{} is not a pipeline schedule; expected \"gpipe\" (all forwards, then all "
                                     "backwards) or \"1f1b\" (one forward, one backward)", detail::show(v))});
}

void check_instance_type(const json& v, const std::string& path, Problems& out) {
  const auto& s = v.get_ref<const std::string&>();
  if (find_instance_type(s) != nullptr) return;
  std::vector<std::string> names;
  bool ml = s.rfind("ml.", 0) == 0;
  for (const auto& t : instance_types()) names.push_back(ml ? std::string("ml.") + t.name : t.name);
  auto near = text::closest(s, names);
  out.push_back({path, fmt::format("{} is not a GPU instance type dtrain knows{}; give one of AWS's GPU types (e.g. "
                                   "\"ml.p3.8xlarge\", \"p4d.24xlarge\", see dtrain-job(5)), or gpus_per_instance (GPU "
                                   "workers) or procs_per_instance (CPU workers) instead",
                                   detail::show(v), near ? fmt::format(" (did you mean \"{}\"?)", *near) : "")});
}

void check_cpu_bind(const json& v, const std::string& path, Problems& out) {
  const auto& s = v.get_ref<const std::string&>();
  if (s != "none" && s != "core" && s != "numa")
    out.push_back({path, fmt::format("{} is not a CPU binding; expected \"none\" (the workers run where the kernel "
                                     "puts them), \"core\" (each local rank on its own share of the cores this agent "
                                     "may use) or \"numa\" (each local rank on the cores of one NUMA node)",
                                     detail::show(v))});
}

void check_scaling(const json& v, const std::string& path, Problems& out) {
  const auto& s = v.get_ref<const std::string&>();
  if (s != "linear" && s != "sqrt" && s != "none")
    out.push_back({path, fmt::format("{} is not a learning-rate scaling; expected \"linear\" (base x global / "
                                     "reference), \"sqrt\" (base x sqrt(global / reference)) or \"none\"",
                                     detail::show(v))});
}

LearningRateSpec& lr(JobSpec& s) {
  if (!s.batch.learning_rate) s.batch.learning_rate.emplace();
  return *s.batch.learning_rate;
}

std::vector<std::string> strings(const json& v) { return v.get<std::vector<std::string>>(); }

constexpr double kMaxInstances = 65536;
constexpr double kMaxSlots = 4096;
constexpr double kMaxBatch = 2147483647.0;      // 2^31 - 1
constexpr double kMaxSamples = 1e15;
constexpr double kMaxSeconds = 31536000;       // one year

// clang-format off
const FieldInfo kFields[] = {
  {"/version", FieldType::integer, "1", "spec format version; this dtrain reads version 1", 1, 1, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.version = v.get<int>(); }},
  {"/name", FieldType::string, "basename of command[0]", "job name, used in the run id and log file names", 0, 0, false, false, check_name,
   +[](JobSpec& s, const json& v) { s.name = v.get<std::string>(); }},
  {"/command", FieldType::string_list, "required", "program and arguments of every worker, run without a shell", 0, 0, false, true, check_command,
   +[](JobSpec& s, const json& v) { s.command = strings(v); }},
  {"/workdir", FieldType::string, "\".\"", "working directory of the workers, relative to where dtrain starts", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.workdir = v.get<std::string>(); }},

  {"/cluster", FieldType::object, "{}", "how many nodes and workers per node", 0, 0, false, false, nullptr, nullptr},
  {"/cluster/instances", FieldType::nodes, "1 (or the node count of Slurm, SageMaker, torch env)", "number of nodes (instances), or {\"min\": A, \"max\": B} for an elastic job", 1, kMaxInstances, false, false, nullptr,
   +[](JobSpec& s, const json& v) {
     if (v.is_object()) { s.cluster.instances = v.at("max").get<int>(); s.cluster.min_instances = v.at("min").get<int>(); }
     else { s.cluster.instances = v.get<int>(); s.cluster.min_instances.reset(); }
   }},
  {"/cluster/gpus_per_instance", FieldType::gpus, "\"auto\"", "GPU workers per node; \"auto\": one per visible GPU, else CPU workers", 1, kMaxSlots, false, false, nullptr,
   +[](JobSpec& s, const json& v) {
     if (v.is_string()) { s.cluster.gpus_auto = true; s.cluster.gpus_per_instance.reset(); }
     else { s.cluster.gpus_auto = false; s.cluster.gpus_per_instance = v.get<int>(); }
   }},
  {"/cluster/procs_per_instance", FieldType::integer, "one per CPU core", "CPU workers per node (the CPU spelling of gpus_per_instance)", 1, kMaxSlots, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.cluster.procs_per_instance = v.get<int>(); }},
  {"/cluster/instance_type", FieldType::string, "unset", "GPU instance type (\"ml.p3.8xlarge\", \"p4d.24xlarge\"): GPUs per instance from dtrain's table of AWS types", 0, 0, false, false, check_instance_type,
   +[](JobSpec& s, const json& v) { s.cluster.instance_type = v.get<std::string>(); }},
  {"/cluster/bind_gpus", FieldType::boolean, "false", "give each GPU worker its own GPU through CUDA_VISIBLE_DEVICES", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.cluster.bind_gpus = v.get<bool>(); }},
  {"/cluster/cpu_bind", FieldType::string, "\"none\"", "each local rank's CPUs: \"none\" (unbound), \"core\" (its share of the cores) or \"numa\" (whole NUMA nodes, with GPUs its GPU's)", 0, 0, false, false, check_cpu_bind,
   +[](JobSpec& s, const json& v) { s.cluster.cpu_bind = v.get<std::string>(); }},

  {"/batch", FieldType::object, "unset (no batch math)", "batch sizes, handed to workers as DTRAIN_* variables", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json&) { s.has_batch = true; }},
  {"/batch/per_replica", FieldType::integer, "global / data", "samples per replica per iteration", 1, kMaxBatch, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.batch.per_replica = v.get<std::int64_t>(); }},
  {"/batch/global", FieldType::integer, "data x per_replica", "samples per iteration over all replicas; must divide by the replicas (parallel.data)", 1, kMaxBatch * 1024, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.batch.global = v.get<std::int64_t>(); }},
  {"/batch/micro_batches", FieldType::integer, "1", "gradient-accumulation steps per iteration; must divide per_replica", 1, kMaxBatch, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.batch.micro_batches = v.get<std::int64_t>(); }},
  {"/batch/dataset_size", FieldType::integer, "unset", "samples in one epoch; gives iterations per epoch", 1, kMaxSamples, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.batch.dataset_size = v.get<std::int64_t>(); }},
  {"/batch/epochs", FieldType::integer, "1", "passes over the dataset", 1, 1000000, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.batch.epochs = v.get<std::int64_t>(); }},
  {"/batch/learning_rate", FieldType::object, "unset (no rate)", "the learning rate the plan scales to the global batch (DTRAIN_LEARNING_RATE)", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json&) { (void)lr(s); }},
  {"/batch/learning_rate/base", FieldType::number, "required", "the rate at reference_global_batch", 0, 1e6, true, false, nullptr,
   +[](JobSpec& s, const json& v) { lr(s).base = v.get<double>(); }},
  {"/batch/learning_rate/reference_global_batch", FieldType::integer, "required unless scaling is \"none\"", "the global batch base was tuned at", 1, kMaxBatch * 1024, false, false, nullptr,
   +[](JobSpec& s, const json& v) { lr(s).reference_global_batch = v.get<std::int64_t>(); }},
  {"/batch/learning_rate/scaling", FieldType::string, "\"linear\"", "\"linear\" (base x global / reference), \"sqrt\" or \"none\"", 0, 0, false, false, check_scaling,
   +[](JobSpec& s, const json& v) { lr(s).scaling = v.get<std::string>(); }},
  {"/batch/learning_rate/warmup_iterations", FieldType::integer, "0", "iterations over which the workers ramp up to the rate (DTRAIN_WARMUP_ITERATIONS)", 0, 1e12, false, false, nullptr,
   +[](JobSpec& s, const json& v) { lr(s).warmup_iterations = v.get<std::int64_t>(); }},

  {"/parallel", FieldType::object, "{}", "model parallelism: pipeline stages x tensor shards x data replicas", 0, 0, false, false, nullptr, nullptr},
  {"/parallel/pipeline", FieldType::integer, "1", "pipeline stages the model is split into", 1, kMaxSlots, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.parallel.pipeline = v.get<int>(); }},
  {"/parallel/tensor", FieldType::integer, "1", "tensor shards per pipeline stage", 1, kMaxSlots, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.parallel.tensor = v.get<int>(); }},
  {"/parallel/data", FieldType::integer, "world size / (pipeline x tensor)", "data-parallel replicas of the model; the batch math's replicas", 1, 1048576, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.parallel.data = v.get<int>(); }},
  {"/parallel/order", FieldType::string, "\"tp-dp-pp\"", "rank layout, fastest-varying first: tensor, then data, then pipeline", 0, 0, false, false, check_order,
   +[](JobSpec& s, const json& v) { s.parallel.order = v.get<std::string>(); }},
  {"/parallel/schedule", FieldType::string, "\"1f1b\"", "pipeline schedule over micro-batches: \"gpipe\" or \"1f1b\"", 0, 0, false, false, check_schedule,
   +[](JobSpec& s, const json& v) { s.parallel.schedule = v.get<std::string>(); }},

  {"/rendezvous", FieldType::object, "{}", "where the nodes meet", 0, 0, false, false, nullptr, nullptr},
  {"/rendezvous/backend", FieldType::string, "\"builtin\"", "what holds the rendezvous: \"builtin\" (dtrain's store on node 0 or a `dtrain rendezvous serve` host) or \"etcd\" (an etcd v3 cluster at endpoint)", 0, 0, false, false, check_backend,
   +[](JobSpec& s, const json& v) { s.rendezvous.backend = v.get<std::string>(); }},
  {"/rendezvous/etcd", FieldType::object, "{}", "the etcd backend's TLS and authentication", 0, 0, false, false, nullptr, nullptr},
  {"/rendezvous/etcd/cacert", FieldType::string, "unset (plain http)", "CA bundle (PEM) that signed etcd's certificate; any TLS field makes the connection https", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.etcd.cacert = v.get<std::string>(); }},
  {"/rendezvous/etcd/cert", FieldType::string, "unset", "client certificate (PEM) for etcd's --client-cert-auth", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.etcd.cert = v.get<std::string>(); }},
  {"/rendezvous/etcd/key", FieldType::string, "unset", "private key (PEM) of the client certificate", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.etcd.key = v.get<std::string>(); }},
  {"/rendezvous/etcd/user", FieldType::string, "unset (no etcd authentication)", "etcd user name", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.etcd.user = v.get<std::string>(); }},
  {"/rendezvous/etcd/password_file", FieldType::string, "unset", "file holding the etcd user's password", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.etcd.password_file = v.get<std::string>(); }},
  {"/rendezvous/endpoint", FieldType::string, "unset (standalone store on node 0)", "HOST:PORT of the rendezvous store (etcd: of an etcd member)", 0, 0, false, false, check_endpoint,
   +[](JobSpec& s, const json& v) { s.rendezvous.endpoint = v.get<std::string>(); }},
  {"/rendezvous/join_timeout_s", FieldType::number, "600", "seconds to wait for every node to join", 0, kMaxSeconds, true, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.join_timeout_s = v.get<double>(); }},
  {"/rendezvous/heartbeat_s", FieldType::number, "5", "seconds between agent heartbeats", 0, 3600, true, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.heartbeat_s = v.get<double>(); }},
  {"/rendezvous/heartbeat_timeout_s", FieldType::number, "3 x heartbeat_s", "seconds of silence after which a node is declared lost", 0, kMaxSeconds, true, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.heartbeat_timeout_s = v.get<double>(); }},
  {"/rendezvous/last_call_s", FieldType::number, "30", "elastic jobs: seconds the join barrier stays open for more nodes once min have joined", 0, kMaxSeconds, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.last_call_s = v.get<double>(); }},
  {"/rendezvous/token_file", FieldType::string, "unset (no token: loopback only)", "file holding the shared rendezvous token", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.rendezvous.token_file = v.get<std::string>(); }},
  {"/rendezvous/run_id", FieldType::string, "SLURM_JOB_ID, else generated", "id shared by every node of one run", 0, 0, false, false, check_run_id,
   +[](JobSpec& s, const json& v) { s.rendezvous.run_id = v.get<std::string>(); }},

  {"/restart", FieldType::object, "{}", "what to do when a worker fails", 0, 0, false, false, nullptr, nullptr},
  {"/restart/max_restarts", FieldType::integer, "0", "times the whole group is restarted after a failure", 0, 10000, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.restart.max_restarts = v.get<int>(); }},
  {"/restart/backoff_s", FieldType::number, "0", "seconds to wait before each restart", 0, 86400, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.restart.backoff_s = v.get<double>(); }},
  {"/restart/checkpoint_dir", FieldType::string, "unset (a folder of the launch: <log folder>/checkpoint, else under $TMPDIR)", "folder the workers save and resume from (DTRAIN_CHECKPOINT_DIR), relative to workdir", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.restart.checkpoint_dir = v.get<std::string>(); }},

  {"/env", FieldType::string_map, "{}", "extra environment variables for every worker", 0, 0, false, false, check_env,
   +[](JobSpec& s, const json& v) { s.env = v.get<std::map<std::string, std::string>>(); }},

  {"/output", FieldType::object, "{}", "how worker output is shown and kept", 0, 0, false, false, nullptr, nullptr},
  {"/output/tag", FieldType::boolean, "true", "prefix every output line with its node and rank", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.output.tag = v.get<bool>(); }},
  {"/output/tag_format", FieldType::string, "\"[{node}/{rank}] \"", "the prefix; fields {node} {rank} {local_rank} {stream}", 0, 0, false, false, check_tag_format,
   +[](JobSpec& s, const json& v) { s.output.tag_format = v.get<std::string>(); }},
  {"/output/timestamps", FieldType::boolean, "false", "prefix every output line with the time", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.output.timestamps = v.get<bool>(); }},
  {"/output/log_dir", FieldType::string, "unset (no log files)", "directory for one log file per rank", 0, 0, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.output.log_dir = v.get<std::string>(); }},
  {"/output/hang_timeout_s", FieldType::number, "unset (no hang detection)", "a worker waiting this many seconds in one collective ends the job as hung (exit 70)", 0, kMaxSeconds, true, false, nullptr,
   +[](JobSpec& s, const json& v) { s.output.hang_timeout_s = v.get<double>(); }},
  {"/output/straggler_share", FieldType::number, "0.2", "warn when one rank keeps the others waiting in the collectives more than this share of the time (0: never)", 0, 1, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.output.straggler_share = v.get<double>(); }},

  {"/grace_s", FieldType::number, "10", "seconds between SIGTERM and SIGKILL when workers are stopped", 0, 3600, false, false, nullptr,
   +[](JobSpec& s, const json& v) { s.grace_s = v.get<double>(); }},
  {"/max_runtime_s", FieldType::number, "unset (no limit)", "stop the job after this many seconds (exit 124)", 0, kMaxSeconds * 10, true, false, nullptr,
   +[](JobSpec& s, const json& v) { s.max_runtime_s = v.get<double>(); }},
};
// clang-format on

std::string num(double x) {
  if (std::floor(x) == x && std::fabs(x) < 1e16) return fmt::format("{}", static_cast<long long>(x));
  return fmt::format("{}", x);
}

}  // namespace

const char* type_name(FieldType type) {
  switch (type) {
    case FieldType::object: return "object";
    case FieldType::integer: return "integer";
    case FieldType::number: return "number";
    case FieldType::boolean: return "boolean";
    case FieldType::string: return "string";
    case FieldType::string_list: return "array of strings";
    case FieldType::string_map: return "object of strings";
    case FieldType::gpus: return "\"auto\" or integer";
    case FieldType::nodes: return "integer or {min, max}";
  }
  return "?";
}

std::span<const FieldInfo> spec_fields() { return kFields; }

const FieldInfo* find_field(std::string_view path) {
  for (const auto& f : kFields)
    if (path == f.path) return &f;
  return nullptr;
}

std::string dotted_name(std::string_view path) {
  std::string out(path.substr(path.empty() || path[0] != '/' ? 0 : 1));
  for (auto& c : out)
    if (c == '/') c = '.';
  return out;
}

std::string expectation(const FieldInfo& f) {
  auto range = [&](const char* noun) {
    std::string lo = f.min_exclusive ? "> " + num(f.min) : ">= " + num(f.min);
    if (f.min == f.max) return fmt::format("{} {}", noun, num(f.min));
    if (f.max >= 1e12 || f.min_exclusive) return fmt::format("{} {} (at most {})", noun, lo, num(f.max));
    return fmt::format("{} from {} to {}", noun, num(f.min), num(f.max));
  };
  switch (f.type) {
    case FieldType::object: return "an object";
    case FieldType::integer: return range("an integer");
    case FieldType::number: return range("a number");
    case FieldType::boolean: return "true or false";
    case FieldType::string: return "a non-empty string";
    case FieldType::string_list: return "an array of strings, e.g. [\"python3\", \"train.py\"]";
    case FieldType::string_map: return "an object of strings, e.g. {\"OMP_NUM_THREADS\": \"4\"}";
    case FieldType::gpus: return "\"auto\" or " + range("an integer");
    case FieldType::nodes: return range("an integer") + ", or {\"min\": A, \"max\": B} with A <= B in that range";
  }
  return "?";
}

}  // namespace dtrain::config
