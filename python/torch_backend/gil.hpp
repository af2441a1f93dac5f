// Blocking from Python without the GIL: the caller often holds it (destroy_process_group, an object
// freed by the interpreter, a C++ op called from Python), while a group's threads may need it to
// finish an op (freeing a tensor whose Python object they hold the last reference to, a future's
// Python callback). Waiting with it held would wait for ever.
#pragma once

#include <functional>
#include <thread>

#include "torch_includes.hpp"

namespace dtrain_torch {

// Runs f (a blocking wait) with the GIL let go when this thread holds it.
void wait_without_gil(const std::function<void()>& f);
// Joins `thread` when joinable.
void join_without_gil(std::thread& thread);
// work.wait().
void wait_without_gil(c10d::Work& work);

}  // namespace dtrain_torch
