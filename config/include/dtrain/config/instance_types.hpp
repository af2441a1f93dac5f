#pragma once
// GPU instance types (cluster.instance_type, SageMaker's current_instance_type): GPUs per instance
// from AWS's published specifications (man/dtrain-job.5 names the pages).
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "dtrain/config/plan.hpp"

namespace dtrain::config {

struct InstanceType {
  const char* name;         // EC2 name, e.g. "p3.8xlarge"; SageMaker's is "ml." + name
  int gpus;                 // NVIDIA GPUs per instance
  const char* accelerator;  // "V100", "A100 40 GB", ...
};

std::span<const InstanceType> instance_types();
// "ml.p3.8xlarge" or "p3.8xlarge" (case as AWS writes it): the row, or nullptr when not in the table.
const InstanceType* find_instance_type(std::string_view name);
// SageMaker's type of this instance: SM_CURRENT_INSTANCE_TYPE, else current_instance_type of
// SM_RESOURCE_CONFIG or the resource file; {type, where it was read} or nullopt.
std::optional<std::pair<std::string, std::string>> sagemaker_instance_type(const Environment& env);

}  // namespace dtrain::config
