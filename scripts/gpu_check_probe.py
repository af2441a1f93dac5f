#!/usr/bin/env python3
"""What scripts/gpu-check.sh needs to know of the torch it builds dtrain's backend against, one
KEY=VALUE line each: version, cuda (None for a CPU build), gpus (devices torch sees), cmake (its
CMake package prefix), nccl_version, nccl_lib (the libnccl.so this process loaded with torch: pip's
nvidia-nccl-cu13 through libtorch_cuda's RPATH, site-packages/nvidia/nccl/lib/libnccl.so.2),
nccl_include (the folder with that NCCL's nccl.h: the wheel's nvidia/nccl/include, else the include/
beside the library's lib/; empty when neither has it), pybind11 (pybind11's CMake folder, empty
without the pybind11 package) and pybind11_abi (the pybind11 ABI macros torch was built with, as
torch.utils.cpp_extension passes them to extensions, ready for CMAKE_CXX_FLAGS)."""
import importlib.util
import os

import torch


def loaded_nccl():
    with open("/proc/self/maps") as maps:
        return next((line.split()[-1] for line in maps if "/libnccl.so" in line), "")


def nccl_include(lib):
    spec = importlib.util.find_spec("nvidia.nccl") if importlib.util.find_spec("nvidia") else None
    places = [os.path.join(p, "include") for p in (spec.submodule_search_locations or [])] if spec else []
    if lib:
        places.append(os.path.join(os.path.dirname(os.path.dirname(lib)), "include"))
    return next((p for p in places if os.path.isfile(os.path.join(p, "nccl.h"))), "")


def pybind11_cmake():
    try:
        import pybind11
    except ImportError:
        return ""
    return pybind11.get_cmake_dir()


def main():
    cuda = torch.cuda.is_available()
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if cuda else ""
    lib = loaded_nccl()
    abi = [(n, getattr(torch._C, f"_PYBIND11_{n}", None)) for n in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI")]
    for key, value in [("version", torch.__version__), ("cuda", torch.version.cuda),
                       ("gpus", torch.cuda.device_count() if cuda else 0), ("cmake", torch.utils.cmake_prefix_path),
                       ("nccl_version", nccl), ("nccl_lib", lib), ("nccl_include", nccl_include(lib)),
                       ("pybind11", pybind11_cmake()),
                       ("pybind11_abi", " ".join(f'-DPYBIND11_{n}=\\"{v}\\"' for n, v in abi if v is not None))]:
        print(f"{key}={value}")


if __name__ == "__main__":
    main()
