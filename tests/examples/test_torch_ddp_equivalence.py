"""An unchanged DDP script trains the same weights on the dtrain backend as on gloo.

examples/torch_ddp/train.py in float64, 8 epochs of 32 steps (256 SGD steps), 2 ranks: with
--backend gloo and with --backend dtrain under `dtrain launch`, and with --backend dtrain under a
file:// init (two processes started here, no launcher). The weights must agree to 1e-12 relative
(max |a - b| / max |b|; with two ranks a sum has one order, so they are expected to be equal), and a
run with another learning rate must not (so the comparison can fail). Exit 77 with the reason where
torch or the backend is absent (torch_util.py).

    test_torch_ddp_equivalence.py DTRAIN_BIN EXAMPLE_DIR [BACKEND]

BACKEND (default dtrain) is what is compared with gloo.
"""
import os
import shutil
import subprocess
import sys

import torch_util as tu

TOLERANCE = 1e-12
STEPS_ARGS = ["--epochs", "8", "--batch", "32", "--float64"]


def launch(dtrain_bin, script, tmp, backend, lr, name):
    out = os.path.join(tmp, name + ".weights")
    cmd = [dtrain_bin, "launch", "--python", sys.executable, "--nproc-per-node", "2", script, *STEPS_ARGS,
           "--lr", str(lr), "--backend", backend, "--weights-out", out]
    text = tu.run(cmd, tu.base_env(), what=f"dtrain launch, backend {backend}, lr {lr}")
    if f"done: 2 replicas agree ({backend})" not in text:
        sys.exit(f"FAIL: {name}: no 'replicas agree' line\n{text}")
    return tu.read_weights(out)


def file_init(script, tmp, backend, lr):
    """Two ranks as plain processes meeting through init_method file://, no launcher."""
    out = os.path.join(tmp, "file.weights")
    url = "file://" + os.path.join(tmp, "init-file")
    cmd = [sys.executable, script, *STEPS_ARGS, "--lr", str(lr), "--backend", backend, "--weights-out", out,
           "--init-method", url]
    procs = [subprocess.Popen(cmd, env=tu.base_env(RANK=r, WORLD_SIZE=2, LOCAL_RANK=r), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    texts = []
    for p in procs:
        try:
            texts.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            sys.exit("FAIL: file:// init: the ranks did not finish within 240 s")
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"FAIL: file:// init: exit {[p.returncode for p in procs]}\n" + "\n".join(texts))
    return tu.read_weights(out)


def main():
    dtrain_bin, example = sys.argv[1], sys.argv[2]
    backend = sys.argv[3] if len(sys.argv) > 3 else "dtrain"
    tu.require_backend(backend)
    tmp = tu.scratch("dtrain-ddp-eq-")
    script = os.path.join(example, "train.py")
    reference = launch(dtrain_bin, script, tmp, "gloo", 0.01, "gloo")
    failures = []

    def same(name, w):
        d = tu.relative_difference(w, reference)
        print(f"{name} vs gloo: relative difference {d:.3g}", flush=True)
        if not d < TOLERANCE:
            failures.append(f"{name}: {d:.3g} >= {TOLERANCE}")

    same(f"{backend}, dtrain launch", launch(dtrain_bin, script, tmp, backend, 0.01, "launch"))
    same(f"{backend}, file:// init", file_init(script, tmp, backend, 0.01))
    d = tu.relative_difference(launch(dtrain_bin, script, tmp, backend, 0.012, "other-lr"), reference)
    print(f"{backend} with lr 0.012 vs gloo with lr 0.01: relative difference {d:.3g}", flush=True)
    if not d > 1e-4:
        failures.append(f"another learning rate gave the same weights ({d:.3g}): the comparison cannot fail")
    if failures:
        print("kept: " + tmp)
        sys.exit("FAIL: " + "; ".join(failures))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"ok: 256 float64 DDP steps on {backend} equal gloo's (< {TOLERANCE:g}), another lr differs")


if __name__ == "__main__":
    main()
