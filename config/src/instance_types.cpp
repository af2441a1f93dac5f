// The GPU instance type table (instance_types.hpp). Source: AWS's published instance specifications,
// https://aws.amazon.com/ec2/instance-types/ (Accelerated Computing: P2, P3, P4, P5, G4dn, G5, G6,
// G6e) and, for the ml.* names, https://aws.amazon.com/sagemaker/pricing/ (the same hardware).
#include "dtrain/config/instance_types.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace dtrain::config {
namespace {

// clang-format off
constexpr InstanceType kTypes[] = {
  {"p2.xlarge", 1, "K80"}, {"p2.8xlarge", 8, "K80"}, {"p2.16xlarge", 16, "K80"},
  {"p3.2xlarge", 1, "V100 16 GB"}, {"p3.8xlarge", 4, "V100 16 GB"}, {"p3.16xlarge", 8, "V100 16 GB"},
  {"p3dn.24xlarge", 8, "V100 32 GB"},
  {"p4d.24xlarge", 8, "A100 40 GB"}, {"p4de.24xlarge", 8, "A100 80 GB"},
  {"p5.48xlarge", 8, "H100 80 GB"}, {"p5e.48xlarge", 8, "H200 141 GB"}, {"p5en.48xlarge", 8, "H200 141 GB"},
  {"g4dn.xlarge", 1, "T4"}, {"g4dn.2xlarge", 1, "T4"}, {"g4dn.4xlarge", 1, "T4"}, {"g4dn.8xlarge", 1, "T4"},
  {"g4dn.16xlarge", 1, "T4"}, {"g4dn.12xlarge", 4, "T4"}, {"g4dn.metal", 8, "T4"},
  {"g5.xlarge", 1, "A10G"}, {"g5.2xlarge", 1, "A10G"}, {"g5.4xlarge", 1, "A10G"}, {"g5.8xlarge", 1, "A10G"},
  {"g5.16xlarge", 1, "A10G"}, {"g5.12xlarge", 4, "A10G"}, {"g5.24xlarge", 4, "A10G"}, {"g5.48xlarge", 8, "A10G"},
  {"g6.xlarge", 1, "L4"}, {"g6.2xlarge", 1, "L4"}, {"g6.4xlarge", 1, "L4"}, {"g6.8xlarge", 1, "L4"},
  {"g6.16xlarge", 1, "L4"}, {"g6.12xlarge", 4, "L4"}, {"g6.24xlarge", 4, "L4"}, {"g6.48xlarge", 8, "L4"},
  {"g6e.xlarge", 1, "L40S"}, {"g6e.2xlarge", 1, "L40S"}, {"g6e.4xlarge", 1, "L40S"}, {"g6e.8xlarge", 1, "L40S"},
  {"g6e.16xlarge", 1, "L40S"}, {"g6e.12xlarge", 4, "L40S"}, {"g6e.24xlarge", 4, "L40S"}, {"g6e.48xlarge", 8, "L40S"},
};
// clang-format on

std::optional<std::string> current_type_of(const std::string& json_text) {
  try {
    auto j = nlohmann::json::parse(json_text);
    if (j.is_object() && j.contains("current_instance_type") && j["current_instance_type"].is_string())
      return j["current_instance_type"].get<std::string>();
  } catch (const nlohmann::json::exception&) {
  }
  return std::nullopt;  // identity discovery reports a resource configuration that does not parse
}

}  // namespace

std::span<const InstanceType> instance_types() { return kTypes; }

const InstanceType* find_instance_type(std::string_view name) {
  if (name.rfind("ml.", 0) == 0) name.remove_prefix(3);
  for (const auto& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

std::optional<std::pair<std::string, std::string>> sagemaker_instance_type(const Environment& env) {
  if (const std::string* t = env.get("SM_CURRENT_INSTANCE_TYPE"); t != nullptr && !t->empty())
    return std::pair{*t, std::string("SM_CURRENT_INSTANCE_TYPE")};
  if (const std::string* rc = env.get("SM_RESOURCE_CONFIG"); rc != nullptr && !rc->empty()) {
    if (auto t = current_type_of(*rc)) return std::pair{*t, std::string("SM_RESOURCE_CONFIG current_instance_type")};
    return std::nullopt;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(env.sagemaker_resource_file, ec)) return std::nullopt;
  std::ifstream in(env.sagemaker_resource_file);
  std::stringstream ss;
  ss << in.rdbuf();
  if (auto t = current_type_of(ss.str())) return std::pair{*t, env.sagemaker_resource_file + " current_instance_type"};
  return std::nullopt;
}

}  // namespace dtrain::config
