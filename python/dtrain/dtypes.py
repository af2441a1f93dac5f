"""The C ABI's element types and reduction ops, and how numpy arrays map to them.

numpy dtype -> dtrain dtype: int8, uint8, int16, int32, int64, float16, float32 and float64 map to the
type of the same name (native byte order only), numpy's bool to bool (one byte, 0 or 1). bfloat16 has
no numpy dtype: pass a uint16 (or int16) array holding the bfloat16 bit patterns together with
``dtype="bfloat16"``, or an array of
``ml_dtypes.bfloat16`` when that package is installed (recognised by its dtype name, without
importing it). :func:`to_bfloat16` and :func:`from_bfloat16` convert float32 <-> bfloat16 bits.
"""

import enum

import numpy as np

from .errors import ArgumentError

__all__ = ["DType", "Op", "to_bfloat16", "from_bfloat16"]


class DType(enum.IntEnum):
    """dtrain_dtype_t."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    INT64 = 3
    FLOAT16 = 4
    BFLOAT16 = 5
    FLOAT32 = 6
    FLOAT64 = 7
    BOOL = 8
    INT16 = 9


class Op(enum.IntEnum):
    """dtrain_op_t. AVG is the sum divided by the communicator size (integers truncate toward zero);
    BAND, BOR and BXOR take integer and bool arrays. On bool, sum and max are or, prod and min and."""

    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7


_BY_NUMPY = {np.dtype(name): DType[name.upper()]
             for name in ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool")}
_BY_NAME = {t.name.lower(): t for t in DType}
_OPS = {op.name.lower(): op for op in Op}
_OPS.update({int(op): op for op in Op})
_NAMES = "int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64, bool"


def dtype_code(a, dtype, call):
    """The dtrain dtype for array ``a``; ``dtype`` (a name, DType or numpy dtype) overrides the
    array's own only to say that 2-byte integers hold bfloat16 bits, else it must match."""
    if dtype is None:
        code = _BY_NUMPY.get(a.dtype)
        if code is not None:
            return code
        if a.dtype.name == "bfloat16":  # ml_dtypes
            return DType.BFLOAT16
        hint = ""
        if a.dtype.newbyteorder("=") in _BY_NUMPY:
            hint = " (non-native byte order: convert with a.astype(a.dtype.newbyteorder('=')))"
        elif a.dtype == np.dtype(np.uint16):
            hint = " (for bfloat16 bit patterns pass dtype='bfloat16')"
        raise ArgumentError(f"arrays of {a.dtype} are not supported{hint}; dtrain's types: {_NAMES}", call)
    name = dtype.name.lower() if isinstance(dtype, DType) else str(np.dtype(dtype) if not isinstance(dtype, str)
                                                                    else dtype).lower()
    code = _BY_NAME.get(name)
    if code is None:
        raise ArgumentError(f"dtype={dtype!r} is not one of dtrain's types: {_NAMES}", call)
    if code == DType.BFLOAT16:
        if a.dtype.itemsize != 2 or (a.dtype.kind not in "uiV" and a.dtype.name != "bfloat16"):
            raise ArgumentError(f"dtype='bfloat16' needs 2-byte elements (uint16 bit patterns or ml_dtypes.bfloat16), "
                                f"not {a.dtype}", call)
        return code
    if a.dtype != np.dtype(name):
        raise ArgumentError(f"dtype={name!r} does not match the array's {a.dtype}; convert it with a.astype({name!r})",
                            call)
    return code


def op_code(op, call):
    """The dtrain op for "sum", "prod", "min", "max", "avg", "band", "bor", "bxor" (or an Op)."""
    try:
        code = _OPS.get(op.lower() if isinstance(op, str) else op)
    except TypeError:  # unhashable
        code = None
    if code is None:
        raise ArgumentError(f"op={op!r} is not one of sum, prod, min, max, avg, band, bor, bxor", call)
    return code


def to_bfloat16(x):
    """float values -> uint16 bfloat16 bit patterns (round to nearest even; NaN stays NaN)."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16).astype(np.uint16) | 0x0040)
    return rounded


def from_bfloat16(bits):
    """uint16 bfloat16 bit patterns -> float32 values (exact)."""
    b = np.ascontiguousarray(bits)
    if b.dtype.name == "bfloat16":
        return b.astype(np.float32)
    return (b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
