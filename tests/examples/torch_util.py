"""What the PyTorch example tests of tests/examples share: the skip rule, running a job, weights.

A test exits 77 (skipped) with a one-line reason only where torch cannot be imported or the dtrain
backend was not built at all (no dtrain/_torch_backend*.so in the build tree: libtorch-dev or pybind11 was
missing when CMake ran). A backend that was built but fails to import is a failure, not a skip.
"""
import glob
import os
import subprocess
import sys
import tempfile

SKIP = 77


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def require_backend(backend):
    """Skips unless torch imports and, for "dtrain", the backend was built; fails if it was built but broken."""
    try:
        import torch.distributed  # noqa: F401
    except ImportError as e:
        skip(f"{sys.executable} cannot import torch ({e}); install python3-torch (scripts/install-deps.sh)")
    if backend != "dtrain":
        return
    import dtrain
    package = os.path.dirname(dtrain.__file__)
    built = glob.glob(os.path.join(package, "_torch_backend*.so"))
    if not built:
        skip(f"the dtrain torch backend was not built (no _torch_backend*.so in {package}: libtorch-dev and "
             "pybind11-dev are needed when CMake runs; scripts/install-deps.sh)")
    p = subprocess.run([sys.executable, "-c", "import dtrain.torch"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: the dtrain backend is built ({built[0]}) but `import dtrain.torch` fails:\n{p.stderr}")


def base_env(**extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", DTRAIN_TEST_GPUS="0", GLOO_SOCKET_IFNAME="lo",
               DTRAIN_COLL_TIMEOUT_S="60")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, env, timeout=240, what=""):
    """Runs cmd; returns stdout + stderr; exits the test with FAIL and the output when it fails."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        sys.exit(f"FAIL: {what or cmd} did not finish within {timeout} s\n{e.stdout or ''}{e.stderr or ''}")
    out = p.stdout + p.stderr
    if p.returncode != 0:
        sys.exit(f"FAIL: {what or cmd} exited {p.returncode}\n{out}")
    return out


def read_weights(path):
    with open(path) as f:
        return [float(line) for line in f if line.strip()]


def relative_difference(a, b):
    """max |a - b| / max |b|, as tests/examples/weights.hpp."""
    if len(a) != len(b) or not b:
        sys.exit(f"FAIL: weight vectors of {len(a)} and {len(b)} values")
    return max(abs(x - y) for x, y in zip(a, b)) / max(abs(y) for y in b)


def scratch(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR", "/tmp"))
