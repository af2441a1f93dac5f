# The PyTorch backend "dtrain" (python/torch_backend, the `dtrain.torch` module): a C++ extension
# built against the libtorch of the interpreter of cmake/DtrainPython.cmake, which must import torch:
# Debian's libtorch-dev (torch 1.13 on Debian 12, 2.6 on Debian 13), or a pip torch (its CMake package
# is under `python -c 'import torch; print(torch.utils.cmake_prefix_path)'`: pass it in
# CMAKE_PREFIX_PATH). One source serves torch 1.13 and 2.x (python/torch_backend/torch_compat.hpp).
#
# pybind11: the copy a pip torch ships in its include folder when there is one (it is the one torch
# itself was built with), else pybind11's CMake package (pybind11-dev).
# CUDA: where torch has it (its CMake package found c10_cuda), CUDA tensors go to dtrain's NCCL path
# (cuda_device.cpp, compiled with the CUDA toolkit's headers); elsewhere no_device.cpp.
#
# DTRAIN_TORCH says whether it is built (DTRAIN_TORCH_VERSION: the torch it is built against);
# otherwise DTRAIN_TORCH_SKIP_REASON says why (one status line), and the tests of tests/torch are
# reported as skipped with that reason. DTRAIN_TORCH_CUDA says whether the CUDA part is built.
# Sanitizer builds skip it: neither the interpreter nor libtorch is instrumented.
set(DTRAIN_TORCH OFF)
set(DTRAIN_TORCH_CUDA OFF)
set(DTRAIN_TORCH_SKIP_REASON "")
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  set(DTRAIN_TORCH_SKIP_REASON "not built in sanitizer builds (CMAKE_CXX_FLAGS has -fsanitize; the interpreter and libtorch are not instrumented)")
elseif(NOT Python3_Interpreter_FOUND)
  set(DTRAIN_TORCH_SKIP_REASON "no Python 3 interpreter found (set Python3_EXECUTABLE)")
else()
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch, torch.distributed; print(torch.__version__)"
                  RESULT_VARIABLE _dtrain_torch_py OUTPUT_VARIABLE _dtrain_torch_py_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(DTRAIN_TORCH_VERSION "${_dtrain_torch_py_version}")  # e.g. 1.13.0a0+git..., 2.6.0
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  find_package(Torch CONFIG QUIET)
  if(TORCH_FOUND)
    find_library(DTRAIN_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
    if(EXISTS "${TORCH_INSTALL_PREFIX}/include/pybind11/pybind11.h" AND NOT TORCH_INSTALL_PREFIX STREQUAL "/usr")
      set(DTRAIN_TORCH_PYBIND11 "torch's own copy (${TORCH_INSTALL_PREFIX}/include/pybind11)")
    else()
      set(PYBIND11_FINDPYTHON ON)
      find_package(pybind11 CONFIG QUIET)
      if(pybind11_FOUND)
        set(DTRAIN_TORCH_PYBIND11 "pybind11 ${pybind11_VERSION}")
      endif()
    endif()
  endif()
  if(NOT _dtrain_torch_py EQUAL 0)
    set(DTRAIN_TORCH_SKIP_REASON "${Python3_EXECUTABLE} cannot import torch (install python3-torch, or set Python3_EXECUTABLE)")
  elseif(NOT Python3_Development.Module_FOUND)
    set(DTRAIN_TORCH_SKIP_REASON "no Python development headers for ${Python3_EXECUTABLE} (install python3-dev)")
  elseif(NOT TORCH_FOUND OR NOT DTRAIN_TORCH_PYTHON_LIBRARY)
    set(DTRAIN_TORCH_SKIP_REASON "libtorch's CMake package (TorchConfig.cmake) or libtorch_python not found (install libtorch-dev: scripts/install-deps.sh; for a pip torch pass its torch.utils.cmake_prefix_path in CMAKE_PREFIX_PATH)")
  elseif(NOT DTRAIN_TORCH_PYBIND11)
    set(DTRAIN_TORCH_SKIP_REASON "pybind11 not found (install pybind11-dev: scripts/install-deps.sh)")
  else()
    set(DTRAIN_TORCH ON)
    if(C10_CUDA_LIBRARY)  # set by TorchConfig.cmake only for a torch built with CUDA
      find_package(CUDAToolkit QUIET)
      if(CUDAToolkit_FOUND)
        set(DTRAIN_TORCH_CUDA ON)
      else()
        set(_dtrain_torch_no_cuda "; torch has CUDA, but the CUDA toolkit's headers were not found (set CUDAToolkit_ROOT)")
      endif()
    endif()
  endif()
endif()
if(DTRAIN_TORCH)
  if(DTRAIN_TORCH_CUDA)
    set(_dtrain_torch_devices "CPU and CUDA tensors (CUDA ${CUDAToolkit_VERSION})")
  else()
    set(_dtrain_torch_devices "CPU tensors only${_dtrain_torch_no_cuda}")
  endif()
  message(STATUS "dtrain torch backend: built against torch ${_dtrain_torch_py_version} (${Python3_EXECUTABLE}), "
                 "${_dtrain_torch_devices}, ${DTRAIN_TORCH_PYBIND11}")
else()
  message(STATUS "dtrain torch backend: skipped: ${DTRAIN_TORCH_SKIP_REASON}")
endif()
