"""examples/torch_pipeline trains the weights of one process, through `dtrain launch` (real processes).

The float64 MLP, 2 epochs at a global batch of 16: (pipeline, data) = (1,1) with 1 micro-batch is the
reference; (1,1) with 4 micro-batches, (2,1) and (2,2) with 1 and 4 micro-batches under GPipe and
1F1B, and (2,2) over TCP instead of shared memory, must give its weights to 1e-9 relative
(max |a - b| / max |b|), the figure printed. Another learning rate must not (the comparison can
fail), and a tensor degree above 1 is refused by name.
Exit 77 with the reason where torch or the backend is absent (torch_util.py).

    test_torch_pipeline.py DTRAIN_BIN EXAMPLE_DIR [BACKEND]      (BACKEND: default dtrain)
"""
import json
import os
import shutil
import subprocess
import sys

import torch_util as tu

TOLERANCE = 1e-9
HIDDEN, LAYERS = 16, 4
PARAMS = (8 * HIDDEN + HIDDEN) + (LAYERS - 2) * (HIDDEN * HIDDEN + HIDDEN) + (HIDDEN + 1)


class Runner:
    def __init__(self, dtrain_bin, example, backend):
        self.bin, self.script, self.backend = dtrain_bin, os.path.join(example, "train.py"), backend
        self.tmp = tu.scratch("dtrain-torch-pipe-")
        self.n = 0

    def job(self, pipeline, data, micro, schedule, lr, tensor=1):
        self.n += 1
        prefix = os.path.join(self.tmp, f"w{self.n}")
        spec = {"version": 1, "name": "torch-pipeline-test",
                "command": [sys.executable, self.script, "--backend", self.backend, "--lr", str(lr),
                            "--weights-out", prefix],
                "cluster": {"procs_per_instance": pipeline * data * tensor},
                "parallel": {"pipeline": pipeline, "data": data, "tensor": tensor, "schedule": schedule},
                "batch": {"global": 16, "micro_batches": micro, "dataset_size": 256, "epochs": 2}}
        path = os.path.join(self.tmp, f"job{self.n}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        return path, prefix

    def train(self, pipeline, data, micro, schedule="1f1b", lr=0.1, transport="auto"):
        label = f"pipeline {pipeline} x data {data}, {micro} micro-batches, {schedule}, lr {lr}, {transport}"
        path, prefix = self.job(pipeline, data, micro, schedule, lr)
        out = tu.run([self.bin, "launch", path], tu.base_env(DTRAIN_TRANSPORT=transport), what=label)
        for line in (f"the weights identical on its {data} replicas",
                     f"timing: {schedule}, {pipeline} stages, {micro} micro-batches"):
            if line not in out:
                sys.exit(f"FAIL: {label}: no '{line}' in the output\n{out}")
        w = []
        for s in range(pipeline):
            w += tu.read_weights(f"{prefix}.{s}")
        if len(w) != PARAMS:
            sys.exit(f"FAIL: {label}: {len(w)} weights, {PARAMS} expected")
        return label, w, out

    def refused_tensor(self):
        path, _ = self.job(1, 1, 1, "1f1b", 0.1, tensor=2)
        p = subprocess.run([self.bin, "launch", path], env=tu.base_env(), capture_output=True, text=True,
                           timeout=120)
        want = "DTRAIN_TP_SIZE=2: this example splits the model over pipeline stages only; set parallel.tensor to 1"
        if p.returncode != 2 or want not in p.stderr:
            sys.exit(f"FAIL: parallel.tensor 2: exit {p.returncode}, expected 2 and '{want}'\n{p.stdout}{p.stderr}")


def epoch_loss(out, e):
    mark = f"epoch {e}/2: loss "
    at = out.find(mark)
    return float(out[at + len(mark):].split()[0]) if at >= 0 else float("nan")


def main():
    dtrain_bin, example = sys.argv[1], sys.argv[2]
    backend = sys.argv[3] if len(sys.argv) > 3 else "dtrain"
    tu.require_backend(backend)
    r = Runner(dtrain_bin, example, backend)
    _, one, out = r.train(1, 1, 1)
    failures = []
    if not epoch_loss(out, 2) < epoch_loss(out, 1):
        failures.append(f"the loss did not fall: {epoch_loss(out, 1)} then {epoch_loss(out, 2)}")
    for setup in [(1, 1, 4), (2, 1, 1, "gpipe"), (2, 1, 4, "gpipe"), (2, 1, 4, "1f1b"), (2, 2, 1, "1f1b"),
                  (2, 2, 4, "1f1b"), (2, 2, 4, "gpipe"), (2, 2, 4, "1f1b", 0.1, "tcp")]:
        label, w, _ = r.train(*setup)
        d = tu.relative_difference(w, one)
        print(f"{label} vs one process: relative difference {d:.3g}", flush=True)
        if not d < TOLERANCE:
            failures.append(f"{label}: {d:.3g} >= {TOLERANCE}")
    label, w, _ = r.train(2, 2, 4, "1f1b", lr=0.12)
    d = tu.relative_difference(w, one)
    print(f"{label} vs one process at lr 0.1: relative difference {d:.3g}", flush=True)
    if not d > 1e-4:
        failures.append(f"another learning rate gave the same weights ({d:.3g}): the comparison cannot fail")
    r.refused_tensor()
    if failures:
        print("kept: " + r.tmp)
        sys.exit("FAIL: " + "; ".join(failures))
    shutil.rmtree(r.tmp, ignore_errors=True)
    print(f"ok: every layout and schedule on {backend} trains one process's weights (< {TOLERANCE:g})")


if __name__ == "__main__":
    main()
