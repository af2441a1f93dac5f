#include "gil.hpp"

#include <Python.h>

namespace dtrain_torch {

void wait_without_gil(const std::function<void()>& f) {
  if (Py_IsInitialized() == 0 || PyGILState_Check() == 0) {
    f();
    return;
  }
  PyThreadState* saved = PyEval_SaveThread();
  try {
    f();
  } catch (...) {
    PyEval_RestoreThread(saved);
    throw;
  }
  PyEval_RestoreThread(saved);
}

void join_without_gil(std::thread& thread) {
  if (thread.joinable()) wait_without_gil([&] { thread.join(); });
}

void wait_without_gil(c10d::Work& work) {
  wait_without_gil([&] { work.wait(); });
}

}  // namespace dtrain_torch
