"""Finding, loading and binding libdtrain_collectives.so (ctypes).

Where the library is looked for, in order (the first that loads wins):

1. ``DTRAIN_COLLECTIVES_LIB``: the library file, or a folder holding it; when set, nothing else is
   tried.
2. The folder the build or the install recorded in ``dtrain/_location.py``: the build tree's
   ``lib/`` for the copy of the package in ``<build>/python``, ``<prefix>/<libdir>`` (relative to
   the package) for an installed one.
3. The package's own folder (a library copied next to ``__init__.py``).
4. The dynamic loader's search path (``LD_LIBRARY_PATH``, ``/etc/ld.so.cache``), by soname.

The C ABI's functions of version 0.1 are required; the group and point-to-point functions of 0.2
(``dtrain_comm_split``, ``dtrain_comm_init_group_from_env``, ``dtrain_send``, ``dtrain_recv``,
``dtrain_sendrecv``) are bound when the library exports them, and calling one that it lacks raises
:class:`dtrain.Error` with ``Status.UNSUPPORTED``.
"""

import ctypes
import os
import threading
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_void_p

from .errors import Error, Status

ENV_VAR = "DTRAIN_COLLECTIVES_LIB"
SONAMES = ("libdtrain_collectives.so.0", "libdtrain_collectives.so")

_P = c_void_p  # buffers, the communicator, the stream
REQUIRED = {
    "dtrain_version": (c_char_p, []),
    "dtrain_comm_init_from_env": (c_int, [POINTER(c_void_p)]),
    "dtrain_comm_rank": (c_int, [_P, POINTER(c_int)]),
    "dtrain_comm_size": (c_int, [_P, POINTER(c_int)]),
    "dtrain_allreduce": (c_int, [_P, _P, _P, c_size_t, c_int, c_int, _P]),
    "dtrain_broadcast": (c_int, [_P, _P, _P, c_size_t, c_int, c_int, _P]),
    "dtrain_allgather": (c_int, [_P, _P, _P, c_size_t, c_int, _P]),
    "dtrain_reduce_scatter": (c_int, [_P, _P, _P, c_size_t, c_int, c_int, _P]),
    "dtrain_barrier": (c_int, [_P]),
    "dtrain_comm_destroy": (c_int, [_P]),
    "dtrain_status_string": (c_char_p, [c_int]),
    "dtrain_last_error": (c_char_p, []),
}
# Since 0.2 (version node DTRAIN_0.2): groups and point-to-point.
OPTIONAL = {
    "dtrain_comm_split": (c_int, [_P, c_int, c_int, POINTER(c_void_p)]),
    "dtrain_comm_init_group_from_env": (c_int, [c_int, POINTER(c_void_p)]),
    "dtrain_send": (c_int, [_P, _P, c_size_t, c_int, c_int, c_int, _P]),
    "dtrain_recv": (c_int, [_P, _P, c_size_t, c_int, c_int, c_int, _P]),
    "dtrain_sendrecv": (c_int, [_P, _P, c_size_t, c_int, c_int, c_int, _P, c_size_t, c_int, c_int, c_int, _P]),
}


class Library:
    """The loaded library: its path, version, the bound functions (attributes without the
    ``dtrain_`` prefix) and which optional functions it has."""

    def __init__(self, cdll, path):
        self.path = path
        missing = [name for name in REQUIRED if not hasattr(cdll, name)]
        if missing:
            raise Error(Status.CONFIG, f"{path} is not a usable libdtrain_collectives: it has no "
                        f"{', '.join(missing)}; set {ENV_VAR} to dtrain's library", "load")
        for name, (restype, argtypes) in REQUIRED.items():
            self._bind(cdll, name, restype, argtypes)
        self.present = set()
        for name, (restype, argtypes) in OPTIONAL.items():
            if hasattr(cdll, name):
                self._bind(cdll, name, restype, argtypes)
                self.present.add(name)
        self.version = self.version_fn().decode("utf-8", "replace")

    def _bind(self, cdll, name, restype, argtypes):
        fn = getattr(cdll, name)
        fn.restype = restype
        fn.argtypes = argtypes
        setattr(self, name[len("dtrain_"):] if name != "dtrain_version" else "version_fn", fn)

    def has(self, name):
        """Whether the library exports the optional function ``name`` (e.g. "dtrain_send")."""
        return name in self.present

    def require(self, name, call):
        """The bound optional function ``name``, or Error(UNSUPPORTED) saying the library is too old."""
        if name not in self.present:
            raise Error(Status.UNSUPPORTED,
                        f"this libdtrain_collectives ({self.path}, version {self.version}) has no {name} (too "
                        f"old: groups and point-to-point need the DTRAIN_0.2 functions); use a newer dtrain or "
                        f"point {ENV_VAR} at one", call)
        return getattr(self, name[len("dtrain_"):])

    def fail(self, status, call):
        """Raises Error for a non-zero status, with the thread's dtrain_last_error() text."""
        text = self.last_error()
        message = text.decode("utf-8", "replace") if text else ""
        if not message:
            name = self.status_string(status)
            message = name.decode("utf-8", "replace") if name else f"status {status}"
        raise Error(status, message, call)


def _location_dirs():
    """(label, folder) pairs recorded by the build or the install, absolute."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _location
    except ImportError:  # the package straight from the source tree
        return []
    return [(_location.KIND, os.path.normpath(os.path.join(here, d))) for d in _location.LIBRARY_DIRS]


def search_list():
    """(where, path or soname) in the order the loader tries them."""
    override = os.environ.get(ENV_VAR, "")
    if override:
        if os.path.isdir(override):
            return [(ENV_VAR, os.path.join(override, name)) for name in SONAMES]
        return [(ENV_VAR, override)]
    here = os.path.dirname(os.path.abspath(__file__))
    places = [(label, os.path.join(d, name)) for label, d in _location_dirs() for name in SONAMES]
    places += [("next to the package", os.path.join(here, name)) for name in SONAMES]
    places += [("the dynamic loader's path (LD_LIBRARY_PATH, ld.so.cache)", SONAMES[0])]
    return places


def load():
    """Finds and binds the library; Error(CONFIG) listing every place tried when none loads."""
    tried = []
    for where, path in search_list():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} ({where}): not found")
            continue
        try:
            cdll = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({where}): {e}")
            continue
        return Library(cdll, _real_path(cdll, path))
    raise Error(Status.CONFIG, "cannot load libdtrain_collectives; tried:\n  " + "\n  ".join(tried) +
                f"\nbuild dtrain (the copy of this package in <build>/python finds <build>/lib), install it, or set "
                f"{ENV_VAR} to the library file", "load")


def _real_path(cdll, path):
    """The file the loader actually opened (a soname resolves through the search path)."""
    if os.sep in path:
        return os.path.realpath(path)
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if SONAMES[1] in line and "/" in line:
                    return line[line.index("/"):].strip()
    except OSError:
        pass
    return path


_lock = threading.Lock()
_library = None


def library():
    """The process's Library, loaded on first use."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                _library = load()
    return _library
