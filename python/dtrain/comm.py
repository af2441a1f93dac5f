"""dtrain.Comm: a communicator of libdtrain_collectives, with the collectives on numpy arrays.

Arrays are passed to the library by address, never copied: they must be C-contiguous numpy arrays
(an ArgumentError says so otherwise; ``numpy.ascontiguousarray`` makes one), and an ``out`` array
must be writeable. Every operation returns its result array: a new one when ``out`` is None, else
``out`` itself; ``out=a`` works in place.
"""

import ctypes

import numpy as np

from .dtypes import _BY_NUMPY, _OPS, dtype_code, op_code
from .errors import ArgumentError, Error, Status

__all__ = ["Comm", "UNDEFINED", "PROC_NULL"]

UNDEFINED = -1  #: split color of a rank that joins no new communicator (DTRAIN_UNDEFINED)
PROC_NULL = -2  #: sendrecv peer that skips that direction (DTRAIN_PROC_NULL)


def _check_in(a, call, what="a"):
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"{what} must be a numpy array, not {type(a).__name__} (numpy.asarray makes one)", call)
    if not a.flags.c_contiguous:
        raise ArgumentError(f"{what} is not C-contiguous (shape {a.shape}, strides {a.strides}); dtrain uses the "
                            f"array's memory in place, without copies: pass numpy.ascontiguousarray({what})", call)


def _check_writable(out, call, what="out"):
    _check_in(out, call, what)
    if not out.flags.writeable:
        raise ArgumentError(f"{what} is read-only", call)


def _check_out(out, a, count, call, what="out"):
    """``out`` must be a writeable C-contiguous array of a's element type with ``count`` elements."""
    _check_writable(out, call, what)
    if out.dtype != a.dtype:
        raise ArgumentError(f"{what} has dtype {out.dtype}, the input {a.dtype}: they must be the same", call)
    if out.size != count:
        raise ArgumentError(f"{what} has {out.size} elements (shape {out.shape}); this call needs {count}", call)


_from_buffer = ctypes.c_char.from_buffer


def _address(a):
    """The address of a C-contiguous array's first element (cheaper than a.ctypes.data, which is the
    fallback for read-only and empty arrays)."""
    try:
        return ctypes.addressof(_from_buffer(a))
    except (TypeError, ValueError):
        return a.ctypes.data


def _peer(p):
    return PROC_NULL if p is None else int(p)


class Comm:
    """A group of ranks that call the same collectives in the same order.

    ``dtrain.init()`` gives the world communicator; ``split`` and ``dtrain.init_group`` give
    sub-groups. ``rank`` and ``size`` are this rank's place in it and the number of ranks. Calls are
    blocking (the GIL is released while the library works) and not thread-safe on one communicator.
    ``destroy()`` (or leaving a ``with`` block) frees it; later calls raise Error.
    """

    __slots__ = ("_lib", "_handle", "rank", "size", "name")

    def __init__(self, lib, handle, name):
        self._lib = lib
        self._handle = handle
        self.name = name
        value = ctypes.c_int()
        for attr, fn in (("rank", lib.comm_rank), ("size", lib.comm_size)):
            status = fn(handle, ctypes.byref(value))
            if status:
                lib.fail(status, attr)
            setattr(self, attr, value.value)

    def __repr__(self):
        state = f"rank {self.rank}/{self.size}" if self._handle is not None else "destroyed"
        return f"<dtrain.Comm {self.name} {state}>"

    def _h(self, call):
        if self._handle is None:
            raise Error(Status.INVALID_ARGUMENT, f"the {self.name} communicator was destroyed", call)
        return self._handle

    # ---- collectives ----

    def allreduce(self, a, op="sum", out=None, dtype=None):
        """Reduces ``a`` elementwise over the ranks with ``op`` ("sum", "prod", "min", "max",
        "avg"); every rank gets the result, in a new array or in ``out`` (``out=a``: in place).
        float16 and bfloat16 are reduced in float32 and rounded once; every rank gets the same bits."""
        h = self._handle
        if h is None or type(a) is not np.ndarray or not a.flags.c_contiguous:
            self._h("allreduce")
            _check_in(a, "allreduce")
        code = _BY_NUMPY.get(a.dtype) if dtype is None else None  # the common case first, inline
        if code is None:
            code = dtype_code(a, dtype, "allreduce")
        opc = _OPS.get(op) if type(op) is str else None
        if opc is None:
            opc = op_code(op, "allreduce")
        if out is None:
            out = np.empty_like(a)
        elif out is not a or not a.flags.writeable:
            _check_out(out, a, a.size, "allreduce")
        address = _address(a)
        status = self._lib.allreduce(h, address, address if out is a else _address(out), a.size, code, opc, None)
        if status:
            self._lib.fail(status, "allreduce")
        return out

    def broadcast(self, a, root=0, out=None, dtype=None):
        """Copies ``a`` of rank ``root`` to every rank (a new array, or ``out``; ``out=a`` overwrites
        ``a`` on the other ranks). Every rank passes an array of the same size and dtype; only the
        root's contents are read."""
        h = self._h("broadcast")
        _check_in(a, "broadcast")
        code = dtype_code(a, dtype, "broadcast")
        if out is None:
            out = np.empty_like(a)
        elif out is not a or not a.flags.writeable:
            _check_out(out, a, a.size, "broadcast")
        status = self._lib.broadcast(h, _address(a), _address(out), a.size, code, int(root), None)
        if status:
            self._lib.fail(status, "broadcast")
        return out

    def allgather(self, a, out=None, dtype=None):
        """Concatenates every rank's ``a`` in rank order along the first axis: shape
        ``(size * a.shape[0], *a.shape[1:])``, or ``(size,)`` for a 0-d ``a``. In place when ``a`` is
        this rank's block of ``out`` (``a = out[rank*n:(rank+1)*n]``)."""
        h = self._h("allgather")
        _check_in(a, "allgather")
        code = dtype_code(a, dtype, "allgather")
        if out is None:
            shape = (self.size * a.shape[0],) + a.shape[1:] if a.ndim else (self.size,)
            out = np.empty(shape, dtype=a.dtype)
        else:
            _check_out(out, a, a.size * self.size, "allgather")
        status = self._lib.allgather(h, _address(a), _address(out), a.size, code, None)
        if status:
            self._lib.fail(status, "allgather")
        return out

    def reduce_scatter(self, a, op="sum", out=None, dtype=None):
        """Reduces ``a`` over the ranks and gives rank r block r of the result along the first axis
        (``a.shape[0]`` must divide by ``size``): shape ``(a.shape[0] // size, *a.shape[1:])``. In
        place when ``out`` is this rank's block of ``a`` (``out = a[rank*n:(rank+1)*n]``)."""
        h = self._h("reduce_scatter")
        _check_in(a, "reduce_scatter")
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ArgumentError(f"the first axis of a (shape {a.shape}) must divide by the communicator size "
                                f"{self.size}", "reduce_scatter")
        code = dtype_code(a, dtype, "reduce_scatter")
        opc = op_code(op, "reduce_scatter")
        block = a.size // self.size
        if out is None:
            out = np.empty((a.shape[0] // self.size,) + a.shape[1:], dtype=a.dtype)
        else:
            _check_out(out, a, block, "reduce_scatter")
        status = self._lib.reduce_scatter(h, _address(a), _address(out), block, code, opc, None)
        if status:
            self._lib.fail(status, "reduce_scatter")
        return out

    def barrier(self):
        """Returns once every rank entered it."""
        status = self._lib.barrier(self._h("barrier"))
        if status:
            self._lib.fail(status, "barrier")

    # ---- groups and point-to-point (libraries with the DTRAIN_0.2 functions) ----

    def split(self, color, key=0):
        """MPI_Comm_split: collective over this communicator. Ranks passing the same ``color`` >= 0
        form a new Comm, ranked by ``key`` (ties by rank here); ``color`` None or negative: this rank
        joins none and gets None."""
        fn = self._lib.require("dtrain_comm_split", "split")
        handle = ctypes.c_void_p()
        status = fn(self._h("split"), UNDEFINED if color is None else int(color), int(key), ctypes.byref(handle))
        if status:
            self._lib.fail(status, "split")
        if not handle.value:
            return None
        return Comm(self._lib, handle.value, f"{self.name}/split({color})")

    def send(self, a, peer, tag=0, dtype=None):
        """Sends ``a`` to rank ``peer``; matched with the peer's recv of the same tag, count and
        dtype. Returns once the message is handed to the engine."""
        fn = self._lib.require("dtrain_send", "send")
        _check_in(a, "send")
        code = dtype_code(a, dtype, "send")
        status = fn(self._h("send"), _address(a), a.size, code, int(peer), int(tag), None)
        if status:
            self._lib.fail(status, "send")

    def recv(self, out, peer, tag=0, dtype=None):
        """Receives into ``out`` (its size and dtype say what is expected) from rank ``peer``;
        returns ``out``."""
        fn = self._lib.require("dtrain_recv", "recv")
        _check_writable(out, "recv")
        code = dtype_code(out, dtype, "recv")
        status = fn(self._h("recv"), _address(out), out.size, code, int(peer), int(tag), None)
        if status:
            self._lib.fail(status, "recv")
        return out

    def sendrecv(self, a, dest, out, source, sendtag=0, recvtag=0, dtype=None):
        """Sends ``a`` to ``dest`` and receives into ``out`` from ``source`` at the same time
        (never deadlocks on the other direction); returns ``out``. ``dest`` or ``source`` None skips
        that direction (``a`` or ``out`` may then be None)."""
        fn = self._lib.require("dtrain_sendrecv", "sendrecv")
        h = self._h("sendrecv")
        dest, source = _peer(dest), _peer(source)
        send_ptr, send_n, send_t = None, 0, 0
        if a is not None:
            _check_in(a, "sendrecv", "a")
            send_ptr, send_n, send_t = _address(a), a.size, dtype_code(a, dtype, "sendrecv")
        elif dest != PROC_NULL:
            raise ArgumentError("a is None but dest is a rank: pass the array to send", "sendrecv")
        recv_ptr, recv_n, recv_t = None, 0, 0
        if out is not None:
            _check_writable(out, "sendrecv")
            recv_ptr, recv_n, recv_t = _address(out), out.size, dtype_code(out, dtype, "sendrecv")
        elif source != PROC_NULL:
            raise ArgumentError("out is None but source is a rank: pass the array to receive into", "sendrecv")
        status = fn(h, send_ptr, send_n, send_t, dest, int(sendtag), recv_ptr, recv_n, recv_t, source, int(recvtag),
                    None)
        if status:
            self._lib.fail(status, "sendrecv")
        return out

    # ---- lifetime ----

    def destroy(self):
        """Frees the communicator (idempotent). Do it on every rank once the last call is done."""
        h, self._handle = self._handle, None
        if h is not None:
            status = self._lib.comm_destroy(h)
            if status:
                self._lib.fail(status, "destroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        try:
            if getattr(self, "_handle", None) is not None:
                self._lib.comm_destroy(self._handle)
                self._handle = None
        except Exception:  # interpreter shutdown: nothing useful to do
            pass
