"""python/dtrain/__init__.py: the public names, their docstrings, and dtrain-python(3) naming every one
of them (and every Comm method and Plan field). No library is loaded."""

import dataclasses
import inspect
import os
import re
import unittest

import dtrain

MAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "man", "dtrain-python.3")


def man_text():
    with open(MAN, encoding="utf-8") as f:
        text = f.read()
    return re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-")


class PublicNames(unittest.TestCase):
    def test_every_public_name_has_a_docstring(self):
        for name in dtrain.__all__:
            obj = getattr(dtrain, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                with self.subTest(name=name):
                    self.assertTrue(inspect.getdoc(obj), f"dtrain.{name} has no docstring")
        for name, fn in inspect.getmembers(dtrain.Comm, inspect.isfunction):
            if not name.startswith("_"):
                with self.subTest(method=name):
                    self.assertTrue(inspect.getdoc(fn), f"Comm.{name} has no docstring")

    def test_the_man_page_names_them(self):
        page = man_text()
        names = set(dtrain.__all__)
        names |= {n for n, _ in inspect.getmembers(dtrain.Comm, inspect.isfunction) if not n.startswith("_")}
        for cls in (dtrain.Plan, dtrain.Batch, dtrain.Parallel, dtrain.LibraryInfo):
            names |= {f.name for f in dataclasses.fields(cls)}
        names |= {s.name for s in dtrain.Status}
        for name in sorted(names):
            with self.subTest(name=name):
                self.assertTrue(name in page, f"{name} is missing from man/dtrain-python.3")

    def test_module_functions_take_the_methods_arguments(self):
        for name in ("allreduce", "broadcast", "allgather", "reduce_scatter", "send", "recv", "sendrecv", "split"):
            with self.subTest(name=name):
                module = list(inspect.signature(getattr(dtrain, name)).parameters)
                method = list(inspect.signature(getattr(dtrain.Comm, name)).parameters)[1:]
                self.assertEqual(module, method)


if __name__ == "__main__":
    unittest.main(verbosity=2)
