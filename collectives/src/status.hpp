#pragma once
// Status codes and the thread-local last error behind the C ABI (NCCL's ncclGetLastError style).
#include <string>

#include "dtrain/collectives.h"

namespace dtrain::coll {

// Records msg as this thread's dtrain_last_error() and returns status.
dtrain_status_t fail(dtrain_status_t status, std::string msg);
void set_last_error(std::string msg);
void clear_last_error() noexcept;
// This thread's last error text (empty when none).
const char* last_error_cstr();

}  // namespace dtrain::coll
