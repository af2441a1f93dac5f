"""dtrain's start-up hook for the Python workers of `dtrain launch` (see dtrain-launch(1), Hangs).

`dtrain launch` puts this folder first on its workers' PYTHONPATH, so that Python's site module runs
this file at start-up, with no change to the user's script. It

- runs the sitecustomize it hides (the interpreter's own, a virtualenv's, one later on PYTHONPATH);
- with DTRAIN_STACKS_FILE set: registers faulthandler on SIGURG, writing every thread's Python stack
  to that file (its first line, "dtrain-stacks pid N", tells the agent whom to signal); the agent
  and `dtrain status --stacks` send the signal and read what it appends;
- with DTRAIN_PROGRESS_FILE set: once torch.distributed is imported, records each of its collective
  calls (gloo, NCCL: any backend but dtrain's own, whose library records them) on the worker's
  progress page, the layout of dtrain/common/progress_page.hpp, so that the agent sees where the
  rank is and its hang rule (output.hang_timeout_s) applies.

DTRAIN_STACKS_FILE is taken out of the environment: the worker's own child processes are not the rank.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_kept = []  # the stacks file stays open for faulthandler


def _chain():
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _stacks():
    path = os.environ.pop("DTRAIN_STACKS_FILE", "")
    if not path:
        return
    import faulthandler
    import signal

    f = open(path, "w", encoding="utf-8")
    f.write("dtrain-stacks pid %d\n" % os.getpid())
    f.flush()
    faulthandler.register(signal.SIGURG, file=f, all_threads=True, chain=False)
    _kept.append(f)


# progress_page.hpp: magic, version (u32), lock (u64), op (u32), pid (i32), seq, bytes, calls (u64),
# begin_ns, end_ns (i64); version 2: op_calls[16] (u64), op_ns[16] (i64), per op the calls that
# returned and their total time inside
_MAGIC, _VERSION, _OP_SLOTS = 0x67707464, 2, 16
_OP_CALLS, _OP_NS = 8, 8 + _OP_SLOTS  # their first 8-byte word
_OPS = {"barrier": 1, "all_reduce": 2, "broadcast": 3, "all_gather": 4, "all_gather_into_tensor": 4,
        "reduce_scatter": 5, "reduce_scatter_tensor": 5, "send": 7, "recv": 8, "reduce": 9, "gather": 10,
        "scatter": 11, "all_to_all": 12, "all_to_all_single": 12}


class _Page:
    def __init__(self, path):
        import mmap

        fd = os.open(path, os.O_RDWR)
        try:
            self.m = mmap.mmap(fd, 4096)
        finally:
            os.close(fd)
        self.view = memoryview(self.m)
        self.u64 = self.view.cast("Q")
        self.i64 = self.view.cast("q")
        self.u32 = self.view.cast("I")
        self.i32 = self.view.cast("i")
        self.seq = 0

    def begin(self, op, nbytes):
        import time

        if self.u32[0] != _MAGIC:  # stamped once, as the collectives library does
            self.i32[5] = os.getpid()
            self.u32[1] = _VERSION
            self.u32[0] = _MAGIC
        self.seq += 1
        lock = self.u64[1]
        self.u64[1] = lock + 1  # odd: a reader retries
        self.u32[4] = op
        self.u64[3] = self.seq
        self.u64[4] = nbytes
        self.u64[5] = self.u64[5] + 1
        self.i64[6] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        self.i64[7] = 0
        self.u64[1] = lock + 2

    def end(self):
        import time

        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        op, inside = self.u32[4], now - self.i64[6]
        if op < _OP_SLOTS and inside >= 0:
            self.i64[_OP_NS + op] += inside
            self.u64[_OP_CALLS + op] += 1
        self.i64[7] = now


def _nbytes(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if hasattr(a, "element_size") and hasattr(a, "numel"):
            return int(a.numel()) * int(a.element_size())
        if isinstance(a, (list, tuple)) and a and hasattr(a[0], "element_size"):
            return sum(int(t.numel()) * int(t.element_size()) for t in a)
    return 0


def _record(c10d, page):
    import functools

    def wrap(name, fn, op):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            group = kwargs.get("group")
            try:
                own = c10d.get_backend(group) == "dtrain"  # its library writes the page itself
            except Exception:  # not initialized: the call itself says why
                own = True
            if own:
                return fn(*args, **kwargs)
            page.begin(op, _nbytes(args, kwargs))
            try:
                return fn(*args, **kwargs)
            finally:
                page.end()

        return call

    for name, op in _OPS.items():
        fn = getattr(c10d, name, None)
        if callable(fn):
            setattr(c10d, name, wrap(name, fn, op))


class _Watch:
    """Records torch.distributed's collectives once distributed_c10d is imported."""

    name = "torch.distributed.distributed_c10d"

    def __init__(self, page):
        self.page = page

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run, page = spec.loader.exec_module, self.page

        def exec_module(module):
            run(module)
            _record(module, page)

        spec.loader.exec_module = exec_module
        return spec


def _progress():
    path = os.environ.get("DTRAIN_PROGRESS_FILE", "")  # kept: dtrain's collectives library reads it too
    if path:
        sys.meta_path.insert(0, _Watch(_Page(path)))


for _step in (_chain, _stacks, _progress):
    try:
        _step()
    except Exception as e:  # the worker runs anyway; the agent then reports "no stack"
        sys.stderr.write("dtrain start-up hook: %s: %s\n" % (_step.__name__, e))
