# The Python side of dtrain: which interpreter the package's tests, examples and bench use, and where
# `cmake --install` puts the `dtrain` package.
#
# Interpreter: Python3_EXECUTABLE when given; else /usr/bin/python3 when it can import numpy (Debian's
# python3-numpy; a python3 earlier on PATH, e.g. pyenv's, often has no numpy); else whatever
# find_package(Python3) finds. DTRAIN_PYTHON_NUMPY says whether that interpreter has numpy; without
# it the Python tests are reported as skipped, and the package is still built and installed.
#
# Install folder, DTRAIN_PYTHON_INSTALL_DIR (relative to the install prefix, or absolute); when empty
# it is derived from CMAKE_INSTALL_PREFIX the way the interpreter's own site path works:
#   Debian's Python (it has the deb_system scheme): lib/python3/dist-packages for the prefix /usr,
#     lib/python3.X/dist-packages for any other prefix (what site.py searches under /usr/local);
#   any other Python: its posix_prefix purelib, e.g. lib/python3.X/site-packages;
#   no Python at all: lib/python3/dist-packages.
# Outside those folders (e.g. `cmake --install build --prefix /opt/dtrain`) point PYTHONPATH there.
if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  execute_process(COMMAND /usr/bin/python3 -c "import numpy" RESULT_VARIABLE _dtrain_np OUTPUT_QUIET ERROR_QUIET)
  if(_dtrain_np EQUAL 0)
    set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python interpreter for the dtrain package's tests")
  endif()
endif()
find_package(Python3 COMPONENTS Interpreter)

set(DTRAIN_PYTHON_NUMPY OFF)
set(DTRAIN_PYTHON_SKIP_REASON "no Python 3 interpreter found (set Python3_EXECUTABLE)")
if(Python3_Interpreter_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy" RESULT_VARIABLE _dtrain_np OUTPUT_QUIET ERROR_QUIET)
  if(_dtrain_np EQUAL 0)
    set(DTRAIN_PYTHON_NUMPY ON)
  else()
    set(DTRAIN_PYTHON_SKIP_REASON
        "${Python3_EXECUTABLE} cannot import numpy (install python3-numpy: scripts/install-deps.sh, or set Python3_EXECUTABLE)")
  endif()
endif()

set(DTRAIN_PYTHON_INSTALL_DIR "" CACHE STRING
    "Folder of the dtrain Python package, relative to the install prefix or absolute (empty: derived from the interpreter)")
if(DTRAIN_PYTHON_INSTALL_DIR)
  set(DTRAIN_PYTHON_SITEDIR ${DTRAIN_PYTHON_INSTALL_DIR})
elseif(Python3_Interpreter_FOUND)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c [=[
import os, sys, sysconfig
prefix = sys.argv[1].rstrip("/") or "/"
if "deb_system" in sysconfig.get_scheme_names():
    v = sys.version_info
    print("lib/python3/dist-packages" if prefix == "/usr" else f"lib/python{v[0]}.{v[1]}/dist-packages")
else:
    path = sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
    print(os.path.relpath(path, prefix))
]=] ${CMAKE_INSTALL_PREFIX}
    OUTPUT_VARIABLE DTRAIN_PYTHON_SITEDIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _dtrain_site)
  if(NOT _dtrain_site EQUAL 0 OR NOT DTRAIN_PYTHON_SITEDIR)
    set(DTRAIN_PYTHON_SITEDIR lib/python3/dist-packages)
  endif()
else()
  set(DTRAIN_PYTHON_SITEDIR lib/python3/dist-packages)
endif()
