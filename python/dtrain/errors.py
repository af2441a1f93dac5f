"""dtrain.Error and the status codes of the C ABI (dtrain_status_t in <dtrain/collectives.h>)."""

import enum

__all__ = ["Status", "Error", "ArgumentError"]


class Status(enum.IntEnum):
    """The library's status codes; ``Error.status`` is one of these."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1  #: bad buffer, count, dtype, op or root; nothing was sent
    CONFIG = 2            #: missing or bad environment or init parameters
    TIMEOUT = 3           #: a deadline passed; the message names the missing ranks
    PEER = 4              #: a peer rank failed or its connection broke
    MISMATCH = 5          #: ranks called with different count/dtype/op/root
    UNSUPPORTED = 6       #: e.g. a device buffer in a build without NCCL, or a function the library lacks
    SYSTEM = 7            #: out of memory, /dev/shm full, socket errors
    NCCL = 8              #: NCCL returned an error
    CUDA = 9              #: the CUDA runtime returned an error
    AUTH = 10             #: the rendezvous store refused the token
    ABORTED = 11          #: the communicator failed earlier; destroy it
    INTERNAL = 12         #: a bug in dtrain


def _status_of(code):
    try:
        return Status(code)
    except ValueError:
        return code


class Error(Exception):
    """A dtrain call failed.

    ``status`` is the :class:`Status` the library returned (``Status.UNSUPPORTED`` when the loaded
    library lacks a function, ``Status.CONFIG`` when it cannot be found or the environment is
    wrong), ``message`` the library's own text (``dtrain_last_error()``: what, where, what to do),
    and ``call`` the operation that failed (e.g. ``"allreduce"``).
    """

    def __init__(self, status, message, call=None):
        self.status = _status_of(status)
        self.message = message
        self.call = call
        name = self.status.name.lower().replace("_", " ") if isinstance(self.status, Status) else "status"
        head = f"dtrain {call}: " if call else "dtrain: "
        super().__init__(f"{head}{message} [{name} ({int(self.status)})]")


class ArgumentError(Error, ValueError):
    """An argument was refused before the library was called (non-contiguous or read-only array,
    unknown dtype or op, sizes that do not fit). ``status`` is ``Status.INVALID_ARGUMENT``; it is a
    ``ValueError`` too."""

    def __init__(self, message, call=None):
        super().__init__(Status.INVALID_ARGUMENT, message, call)
