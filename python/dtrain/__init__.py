"""dtrain: collectives for Python workers of `dtrain launch`, on numpy arrays (see dtrain-python(3)).

    import numpy as np
    import dtrain

    world = dtrain.init()                      # the world communicator, from the launch environment
    g = np.ones(1000)
    dtrain.allreduce(g, op="avg", out=g)       # in place; without out= a new array is returned
    p = dtrain.plan()                          # the plan: p.rank, p.dp_size, p.batch.global_, ...

A thin layer over libdtrain_collectives' C ABI (ctypes): arrays go to the library by address, with
no copies, so they must be C-contiguous. Failures raise dtrain.Error, carrying the library's
status and message. The module-level collectives work on the world communicator of init().
"""

import atexit
import ctypes
import dataclasses
import threading

from . import _library
from .comm import PROC_NULL, UNDEFINED, Comm
from .dtypes import DType, Op, from_bfloat16, to_bfloat16
from .errors import ArgumentError, Error, Status
from .job import Batch, Parallel, Plan, plan

__all__ = [
    "init", "finalize", "world", "allreduce", "broadcast", "allgather", "reduce_scatter", "barrier",
    "split", "send", "recv", "sendrecv", "init_group", "plan", "version", "library_info",
    "Comm", "Plan", "Batch", "Parallel", "LibraryInfo", "Error", "ArgumentError", "Status", "DType", "Op",
    "to_bfloat16", "from_bfloat16", "UNDEFINED", "PROC_NULL",
]

GROUP_KINDS = {"tensor": 0, "pipeline": 1, "data": 2}

_lock = threading.Lock()
_world = None


def init():
    """The world communicator (every rank of the job), created from the environment `dtrain launch`
    sets (RANK, WORLD_SIZE, DTRAIN_STORE_ADDR, ...) on the first call and returned again later.
    Collective: every rank calls it. It is destroyed at exit, or by finalize()."""
    global _world
    with _lock:
        if _world is None:
            lib = _library.library()
            handle = ctypes.c_void_p()
            status = lib.comm_init_from_env(ctypes.byref(handle))
            if status:
                lib.fail(status, "init")
            _world = Comm(lib, handle.value, "world")
        return _world


def world():
    """The world communicator of init(); Error when init() was not called."""
    w = _world
    if w is None:
        raise Error(Status.CONFIG, "no world communicator: call dtrain.init() first", "world")
    return w


def finalize():
    """Destroys the world communicator of init() (init() makes a new one after this)."""
    global _world
    with _lock:
        w, _world = _world, None
    if w is not None:
        w.destroy()


atexit.register(finalize)


def allreduce(a, op="sum", out=None, dtype=None):
    """Comm.allreduce on the world communicator."""
    w = _world
    return (w if w is not None else world()).allreduce(a, op, out, dtype)


def broadcast(a, root=0, out=None, dtype=None):
    """Comm.broadcast on the world communicator."""
    return world().broadcast(a, root, out, dtype)


def allgather(a, out=None, dtype=None):
    """Comm.allgather on the world communicator."""
    return world().allgather(a, out, dtype)


def reduce_scatter(a, op="sum", out=None, dtype=None):
    """Comm.reduce_scatter on the world communicator."""
    return world().reduce_scatter(a, op, out, dtype)


def barrier():
    """Comm.barrier on the world communicator."""
    world().barrier()


def split(color, key=0):
    """Comm.split of the world communicator."""
    return world().split(color, key)


def send(a, peer, tag=0, dtype=None):
    """Comm.send on the world communicator."""
    world().send(a, peer, tag, dtype)


def recv(out, peer, tag=0, dtype=None):
    """Comm.recv on the world communicator."""
    return world().recv(out, peer, tag, dtype)


def sendrecv(a, dest, out, source, sendtag=0, recvtag=0, dtype=None):
    """Comm.sendrecv on the world communicator."""
    return world().sendrecv(a, dest, out, source, sendtag, recvtag, dtype)


def init_group(kind):
    """This rank's "tensor", "pipeline" or "data" group of the job's parallel layout (the
    DTRAIN_TP/PP/DP_* environment), a new Comm whose rank is this rank's coordinate of that kind.
    Collective over the world: every rank asks for the same kinds in the same order."""
    code = GROUP_KINDS.get(kind)
    if code is None:
        raise ArgumentError(f"kind={kind!r} is not one of {', '.join(GROUP_KINDS)}", "init_group")
    lib = _library.library()
    fn = lib.require("dtrain_comm_init_group_from_env", "init_group")
    handle = ctypes.c_void_p()
    status = fn(code, ctypes.byref(handle))
    if status:
        lib.fail(status, "init_group")
    return Comm(lib, handle.value, kind)


@dataclasses.dataclass(frozen=True)
class LibraryInfo:
    """The loaded libdtrain_collectives: its file, version, and the optional (DTRAIN_0.2)
    functions it exports."""

    path: str
    version: str
    optional: frozenset


def library_info():
    """Loads the library if needed and describes it (Error listing where it looked if it cannot)."""
    lib = _library.library()
    return LibraryInfo(lib.path, lib.version, frozenset(lib.present))


def version():
    """The library's version, e.g. "0.1.0"."""
    return _library.library().version
