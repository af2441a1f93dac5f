// The torch and dtrain headers every file of the backend uses (also its precompiled header).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "dtrain/collectives.h"
