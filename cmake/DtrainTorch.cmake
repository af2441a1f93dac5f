# The PyTorch backend "dtrain" (python/torch_backend, the `dtrain.torch` module): a C++ extension
# built against the system's libtorch (find_package(Torch), Debian's libtorch-dev) and pybind11
# (pybind11-dev) for the interpreter of cmake/DtrainPython.cmake, which must import torch.
#
# DTRAIN_TORCH says whether it is built; otherwise DTRAIN_TORCH_SKIP_REASON says why (one status line),
# and the tests of tests/torch are reported as skipped with that reason. Sanitizer builds skip it:
# neither the interpreter nor libtorch is instrumented.
set(DTRAIN_TORCH OFF)
set(DTRAIN_TORCH_SKIP_REASON "")
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  set(DTRAIN_TORCH_SKIP_REASON "not built in sanitizer builds (CMAKE_CXX_FLAGS has -fsanitize; the interpreter and libtorch are not instrumented)")
elseif(NOT Python3_Interpreter_FOUND)
  set(DTRAIN_TORCH_SKIP_REASON "no Python 3 interpreter found (set Python3_EXECUTABLE)")
else()
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch, torch.distributed; print(torch.__version__)"
                  RESULT_VARIABLE _dtrain_torch_py OUTPUT_VARIABLE _dtrain_torch_py_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  find_package(Torch CONFIG QUIET)
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  if(TORCH_FOUND)
    find_library(DTRAIN_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
  endif()
  if(NOT _dtrain_torch_py EQUAL 0)
    set(DTRAIN_TORCH_SKIP_REASON "${Python3_EXECUTABLE} cannot import torch (install python3-torch, or set Python3_EXECUTABLE)")
  elseif(NOT Python3_Development.Module_FOUND)
    set(DTRAIN_TORCH_SKIP_REASON "no Python development headers for ${Python3_EXECUTABLE} (install python3-dev)")
  elseif(NOT TORCH_FOUND OR NOT DTRAIN_TORCH_PYTHON_LIBRARY)
    set(DTRAIN_TORCH_SKIP_REASON "libtorch's CMake package (TorchConfig.cmake) or libtorch_python not found (install libtorch-dev: scripts/install-deps.sh)")
  elseif(NOT pybind11_FOUND)
    set(DTRAIN_TORCH_SKIP_REASON "pybind11 not found (install pybind11-dev: scripts/install-deps.sh)")
  else()
    set(DTRAIN_TORCH ON)
  endif()
endif()
if(DTRAIN_TORCH)
  message(STATUS "dtrain torch backend: built against torch ${_dtrain_torch_py_version} (${Python3_EXECUTABLE})")
else()
  message(STATUS "dtrain torch backend: skipped: ${DTRAIN_TORCH_SKIP_REASON}")
endif()
