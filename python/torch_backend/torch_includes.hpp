// The torch and dtrain headers every file of the backend uses (also its precompiled header).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>

#include "torch_compat.hpp"

#include "dtrain/collectives.h"
