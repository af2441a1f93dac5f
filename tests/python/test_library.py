"""python/dtrain/_library.py and errors.py: where libdtrain_collectives is looked for, the error that
lists every place when it is nowhere, DTRAIN_COLLECTIVES_LIB, a library that is not dtrain's, and the
"too old" error for the optional (DTRAIN_0.2) functions. Single process: no communicator is made."""

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import dtrain
from dtrain import Error, Status, _library

PACKAGE_DIR = os.path.dirname(os.path.abspath(dtrain.__file__))


class Override:
    """Sets (or clears) DTRAIN_COLLECTIVES_LIB for a with block."""

    def __init__(self, value):
        self.value = value

    def __enter__(self):
        self.old = os.environ.pop(_library.ENV_VAR, None)
        if self.value is not None:
            os.environ[_library.ENV_VAR] = self.value

    def __exit__(self, *exc):
        os.environ.pop(_library.ENV_VAR, None)
        if self.old is not None:
            os.environ[_library.ENV_VAR] = self.old


class Locate(unittest.TestCase):
    def test_the_build_tree_copy_finds_the_build_library(self):
        with Override(None):
            lib = _library.load()
        from dtrain import _location
        self.assertEqual(_location.KIND, "the build tree")
        self.assertTrue(lib.path.startswith(os.path.realpath(_location.LIBRARY_DIRS[0])), lib.path)
        self.assertRegex(lib.version, r"^\d+\.\d+\.\d+")
        self.assertEqual(dtrain.version(), lib.version)

    def test_override_with_the_file_or_its_folder(self):
        real = dtrain.library_info().path
        for value in (real, os.path.dirname(real)):
            with self.subTest(value=value), Override(value):
                self.assertEqual(os.path.realpath(_library.load().path), os.path.realpath(real))

    def test_a_bad_override_is_the_only_place_tried(self):
        with Override("/nonexistent/libdtrain_collectives.so.0"), self.assertRaises(Error) as cm:
            _library.load()
        text = str(cm.exception)
        self.assertEqual(cm.exception.status, Status.CONFIG)
        self.assertIn("/nonexistent/libdtrain_collectives.so.0 (DTRAIN_COLLECTIVES_LIB): not found", text)
        self.assertNotIn("build tree", text)
        self.assertIn("set DTRAIN_COLLECTIVES_LIB", text)

    def test_a_library_that_is_not_dtrains(self):
        libm = ctypes.util.find_library("m")
        with Override(libm), self.assertRaises(Error) as cm:
            _library.load()
        self.assertIn("is not a usable libdtrain_collectives: it has no dtrain_version, ", str(cm.exception))

    def test_nowhere_lists_every_place_and_the_package_still_imports(self):
        """A copy of the package without _location.py, and no library on the loader's path."""
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(PACKAGE_DIR, os.path.join(d, "dtrain"),
                            ignore=shutil.ignore_patterns("_location.py", "__pycache__", "*.so*"))
            env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": d, "LC_ALL": "C"}
            code = ("import dtrain\n"
                    "assert dtrain.plan({'RANK': '0', 'WORLD_SIZE': '1'}).world_size == 1\n"
                    "try:\n    dtrain.init()\nexcept dtrain.Error as e:\n    print(e)\n    raise SystemExit(3)\n")
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("cannot load libdtrain_collectives; tried:", r.stdout)
        self.assertIn(os.path.join(d, "dtrain", "libdtrain_collectives.so.0") + " (next to the package): not found",
                      r.stdout)
        self.assertIn("libdtrain_collectives.so.0 (the dynamic loader's path (LD_LIBRARY_PATH, ld.so.cache)):",
                      r.stdout)
        self.assertIn("DTRAIN_COLLECTIVES_LIB", r.stdout)


class Hiding:
    """A loaded library seen without some of its functions: what an older libdtrain_collectives
    looks like to the binder."""

    def __init__(self, cdll, hidden):
        self.cdll, self.hidden = cdll, set(hidden)

    def __getattr__(self, name):
        if name in self.hidden:
            raise AttributeError(name)
        return getattr(self.cdll, name)


class OptionalFunctions(unittest.TestCase):
    def setUp(self):
        self.path = dtrain.library_info().path
        self.cdll = ctypes.CDLL(self.path)

    def test_an_old_library_binds_and_says_what_it_lacks(self):
        old = _library.Library(Hiding(self.cdll, _library.OPTIONAL), self.path)
        self.assertEqual(old.present, set())
        for name in _library.OPTIONAL:
            with self.subTest(name=name), self.assertRaises(Error) as cm:
                old.require(name, "send")
            self.assertEqual(cm.exception.status, Status.UNSUPPORTED)
            self.assertIn(f"this libdtrain_collectives ({self.path}, version {old.version}) has no {name} (too old",
                          str(cm.exception))

    def test_init_group_checks_before_calling(self):
        saved = _library._library
        _library._library = _library.Library(Hiding(self.cdll, ["dtrain_comm_init_group_from_env"]), self.path)
        try:
            with self.assertRaisesRegex(Error, "has no dtrain_comm_init_group_from_env \\(too old"):
                dtrain.init_group("data")
            with self.assertRaisesRegex(dtrain.ArgumentError, "kind='model' is not one of tensor, pipeline, data"):
                dtrain.init_group("model")
        finally:
            _library._library = saved

    def test_what_this_library_has(self):
        info = dtrain.library_info()
        have = {name for name in _library.OPTIONAL if hasattr(self.cdll, name)}
        self.assertEqual(info.optional, have)
        print(f"\n{info.path} {info.version}: optional functions {sorted(have) or 'none'}", file=sys.stderr)


class Errors(unittest.TestCase):
    def test_error_text_and_fields(self):
        e = Error(4, "rank 2 (pid 77) died in allreduce #3", "allreduce")
        self.assertEqual(str(e), "dtrain allreduce: rank 2 (pid 77) died in allreduce #3 [peer (4)]")
        self.assertIs(e.status, Status.PEER)
        self.assertEqual((e.call, e.message), ("allreduce", "rank 2 (pid 77) died in allreduce #3"))
        self.assertEqual(Error(99, "x").status, 99)  # a status this package does not know yet

    def test_the_world_needs_init(self):
        with self.assertRaisesRegex(Error, "call dtrain.init\\(\\) first"):
            dtrain.allreduce(None)

    def test_init_outside_dtrain_launch_carries_the_librarys_message(self):
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "DTRAIN_STORE_ADDR")}
        code = "import dtrain\ntry:\n    dtrain.init()\nexcept dtrain.Error as e:\n    print(int(e.status), e)\n"
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^2 dtrain init: RANK is not set.*\[config \(2\)\]")


if __name__ == "__main__":
    unittest.main(verbosity=2)
