"""Helpers of the dtrain-backend tests (tests/torch): start-up (env://, file://, tcp://), skip,
checks that name the rank, deterministic per-rank data and reference reductions."""

import argparse
import datetime
import functools
import os
import sys
import traceback
import warnings

SKIP = 77


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # pragma: no cover - depends on the machine
    skip(f"{sys.executable} cannot import torch ({e})")
# These tests are registered only where the backend was built (tests/torch/CMakeLists.txt): a backend
# that does not import is a failure, never a skip.
import dtrain.torch  # noqa: F401,E402  registers the backend

# torch 1.13 warns that the private and coalesced ops it still routes will be deprecated
warnings.filterwarnings("ignore", message=".*(deprecated|private function).*", category=UserWarning)

# torch 2.x: the backend is a torch.distributed Backend (dtrain.torch's extension says which it was built as)
TORCH2 = dtrain.torch._torch_backend.TORCH_BACKEND_CLASS
TORCH_VERSION = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def require_torch2(what):
    """Skips (exit 77, the reason printed) on torch 1.13, where `what` does not exist."""
    if not TORCH2:
        skip(f"{what} needs torch 2.x (this is torch {torch.__version__}, where the backend is a ProcessGroup)")


def rel_diff(got, want):
    """max |got - want| / max |want| (0 for two zero tensors)."""
    scale = want.abs().max().item()
    return (got - want).abs().max().item() / (scale if scale > 0 else 1.0)


DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
FLOATING = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--init", default="", help="init_method (file://, tcp://); default env://")
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--world", type=int, default=-1)
    p.add_argument("--timeout", type=float, default=120.0, help="the world group's timeout, seconds")
    return p.parse_args()


def init(args):
    """The default group on backend "dtrain"; returns (rank, world size)."""
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.init:
        dist.init_process_group("dtrain", init_method=args.init, rank=args.rank, world_size=args.world,
                                timeout=timeout)
    else:
        dist.init_process_group("dtrain", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


class Checks:
    """Counts checks; a failed one raises AssertionError naming the rank and what differed."""

    def __init__(self, rank):
        self.rank = rank
        self.count = 0
        self.gloo = 0

    def true(self, cond, what):
        self.count += 1
        if not cond:
            raise AssertionError(f"rank {self.rank}: {what}")

    def equal(self, got, want, what, tol=None):
        self.count += 1
        ok = got.dtype == want.dtype and got.shape == want.shape
        if ok and tol is None:
            ok = torch.equal(got, want)
        elif ok:
            ok = torch.allclose(got.to(torch.complex128 if got.is_complex() else torch.float64),
                                want.to(torch.complex128 if want.is_complex() else torch.float64), rtol=tol, atol=tol)
        if not ok:
            raise AssertionError(f"rank {self.rank}: {what}:\n got  {got}\n want {want}")

    def close(self, got, want, what, rel=1e-9):
        """got matches want within a relative difference of rel (of want's largest magnitude)."""
        self.count += 1
        d = rel_diff(got.detach().to(torch.float64), want.detach().to(torch.float64))
        if got.shape != want.shape or not d < rel:
            raise AssertionError(f"rank {self.rank}: {what}: relative difference {d:.3g} (limit {rel:g}), "
                                 f"shapes {tuple(got.shape)} and {tuple(want.shape)}")

    def raises(self, fn, words, what):
        """fn() raises an exception whose text has every word of `words`."""
        self.count += 1
        try:
            fn()
        except Exception as e:  # the backend's errors arrive as RuntimeError
            text = str(e)
            missing = [w for w in words if w not in text]
            if missing:
                raise AssertionError(f"rank {self.rank}: {what}: the error lacks {missing}: {text}") from e
            return text
        raise AssertionError(f"rank {self.rank}: {what}: no error")


def data(rank, dtype, n=7, shape=None):
    """Rank `rank`'s integer-valued test tensor: exact in every dtype, small enough for products."""
    base = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        t = (base + rank) % 3 == 0
    else:
        v = (base + 3 * rank) % 5 + 1  # 1 .. 5
        if dtype in (torch.int8, torch.int16, torch.int32, torch.int64):
            v = v - 2  # -1 .. 3
        t = v.to(torch.float64)
        if dtype.is_complex:
            t = torch.complex(t, t - 1)
        t = t.to(dtype)
    return t.reshape(shape) if shape is not None else t


def reference(op, tensors, dtype, factor=None):
    """What reducing `tensors` (one per rank) with ReduceOp `op` gives, computed wide, in `dtype`."""
    R = dist.ReduceOp
    if dtype == torch.bool:
        x = [t.clone() for t in tensors]
        fold = {R.SUM: torch.logical_or, R.MAX: torch.logical_or, R.BOR: torch.logical_or,
                R.PRODUCT: torch.logical_and, R.MIN: torch.logical_and, R.BAND: torch.logical_and,
                R.BXOR: torch.logical_xor}[op]
        return functools.reduce(fold, x)
    wide = torch.complex128 if dtype.is_complex else (torch.float64 if dtype.is_floating_point else torch.int64)
    x = torch.stack([t.to(wide) for t in tensors])
    if isinstance(op, str):  # "premul" (ReduceOp's == takes ReduceOps only)
        return (x * factor).sum(0).to(dtype)
    if op == R.SUM:
        out = x.sum(0)
    elif op == R.AVG:
        out = x.sum(0) / len(tensors)
    elif op == R.PRODUCT:
        out = x.prod(0)
    elif op == R.MIN:
        out = x.amin(0)
    elif op == R.MAX:
        out = x.amax(0)
    else:
        fold = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op]
        out = functools.reduce(fold, list(x))
    if dtype == torch.uint8:
        out = out % 256
    return out.to(dtype)


def run_main(main):
    """Runs main(); a failure prints its traceback and exits 1 (the launcher reports the rank)."""
    try:
        main()
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
