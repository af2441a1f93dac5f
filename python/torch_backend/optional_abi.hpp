// The DTRAIN_0.3 entry points past init, bound weakly: with a libdtrain_collectives that lacks one,
// the module still loads and only the ops that need it fail, saying so (ProcessGroupDtrain::require).
#pragma once

#include "dtrain/collectives.h"

#pragma weak dtrain_redop_create_premul_sum
#pragma weak dtrain_redop_destroy
#pragma weak dtrain_reduce
#pragma weak dtrain_gather
#pragma weak dtrain_scatter
#pragma weak dtrain_alltoall
#pragma weak dtrain_alltoallv
#pragma weak dtrain_recv_any

// The address of an entry point as a plain pointer (null when the library does not export it).
#define DTRAIN_TORCH_FN(fn) reinterpret_cast<const void*>(&(fn)), #fn
