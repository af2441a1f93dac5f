#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (run from the repository
root; the files are committed, this script documents how they were made and remakes them)."""
import glob
import os
import shutil
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
VERSION = 2
OPS = dict(hello=1, challenge=2, auth=3, welcome=4, set=10, get=11, add=12, compare_set=13, check=14,
           erase=15, barrier=16, join=30, heartbeat=31, report=32, watch=33, leave=34, status=35,
           list_runs=36, table=37, ok=100, value=101, error=102, progress=103)


def i64(v):
    return struct.pack(">q", v)


def frame(op, *args):
    args = [a.encode() if isinstance(a, str) else a for a in args]
    body = bytes([VERSION, OPS[op]]) + struct.pack(">I", len(args))
    for a in args:
        body += struct.pack(">I", len(a)) + a
    return struct.pack(">I", len(body)) + body


def pack(*fields):
    fields = [f.encode() if isinstance(f, str) else f for f in fields]
    return struct.pack(">I", len(fields)) + b"".join(struct.pack(">I", len(f)) + f for f in fields)


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


NONCE = bytes(range(32))
HELLO = frame("hello", "dtrain-rdzv", "fuzz", "run", i64(0), NONCE, i64(0))
AUTH = frame("auth", b"")
JOIN = frame("join", "host", i64(-1), i64(2), i64(2), "hash", i64(0), "", i64(1000), i64(5000))


def spec():
    repo = os.path.dirname(os.path.dirname(ROOT))
    for path in sorted(glob.glob(os.path.join(repo, "examples", "jobs", "*.json"))):
        shutil.copy(path, os.path.join(ROOT, "spec", os.path.basename(path)))
    write("spec", "minimal.json", '{"command": ["python3", "train.py"]}')
    write("spec", "parallel.json", '{"command": ["a"], "cluster": {"instances": 2, "procs_per_instance": 4},'
          ' "parallel": {"pipeline": 2, "tensor": 2, "schedule": "gpipe"}, "rendezvous": {"endpoint": "h:1"},'
          ' "batch": {"per_replica": 16, "micro_batches": 4, "dataset_size": 1000, "epochs": 3}}')
    write("spec", "global.json", '{"command": ["a"], "cluster": {"gpus_per_instance": 8}, "batch": {"global": 512}}')
    write("spec", "problems.json", '{"command": [], "batch": {"globl": 5, "per_replica": 3, "micro_batches": 2},'
          ' "cluster": {"instances": 0}, "env": {"RANK": "1", "X": 4}, "command": ["b"]}')
    write("spec", "numbers.json", '{"command": ["a"], "grace_s": 1e400, "max_runtime_s": -0.0}')
    write("spec", "deep.json", '{"command": ["a"], "env": ' + "[" * 70 + "]" * 70 + "}")
    write("spec", "output.json", '{"command": ["a"], "output": {"tag": true, "tag_format": "{node}:{rank}:{stream} ",'
          ' "timestamps": true, "log_dir": "logs"}, "restart": {"max_restarts": 3, "backoff_s": 0.5}}')


def hostlist():
    for i, s in enumerate(["gpu[01-03,07],login2,x[9-11]", "r[1-2]n[1-2]", "node[0001-0004]", "a,b,c",
                           "x[3-1]", "bad[", "n[0-999]", "h[00-99]-ib[1-2]", "[]", "a[1,2,,3]"]):
        write("hostlist", f"h{i}", s)


def hosts():
    for i, s in enumerate(["a:4,b:4", "gpu1,gpu2.lab:8", "[fd00::1]:2,[fd00::2]:2", "a,,b", "a:0", "a,a",
                           "# lab\ngpu1 slots=8\n\ngpu2 slots=8 max_slots=16  # two\ngpu3:8\ngpu4\n",
                           "a slots=2\r\nb slots=x\n", "ssh -F 'my cfg' -o \"A=b c\" x\\ y", "ssh 'open"]):
        write("hosts", f"h{i}", s)


def wire():
    frames = [HELLO, frame("challenge", NONCE, i64(1)), AUTH, frame("welcome", "10.0.0.1", NONCE),
              frame("set", "k", b"\x00\x01"), frame("get", "k", i64(100)), frame("add", "n", i64(-5)),
              frame("compare_set", "k", "", "v"), frame("check", "a", "b"), frame("erase", "k"),
              frame("barrier", "b", i64(3), i64(100)), JOIN, frame("heartbeat", "running", i64(2), i64(0), i64(0)),
              frame("report", i64(0), i64(3), i64(1), i64(0), "boom"), frame("watch", i64(0), i64(10)),
              frame("leave", i64(10)), frame("status", ""), frame("list_runs"), frame("table"), frame("ok"),
              frame("value", pack("a", i64(1), "b")), frame("error", i64(3), "limit"),
              frame("progress", i64(1), i64(2), "node 1")]
    for i, f in enumerate(frames):
        write("wire", f"f{i:02d}", bytes([i % 64, i % 2]) + f)
    write("wire", "all", bytes([7, 0]) + b"".join(frames))
    write("wire", "oversize", bytes([3, 1]) + b"\xff\xff\xff\xff\x02")


def record(conn, data):
    return bytes([conn]) + struct.pack(">H", len(data)) + data


def store():
    s = lambda *recs: b"".join(recs)
    write("store", "kv", s(record(0, frame("set", "k", "v")), record(1, frame("get", "k", i64(0))),
                           record(0, frame("add", "n", i64(9223372036854775807))), record(0, frame("add", "n", i64(1))),
                           record(1, frame("compare_set", "k", "v", "w")), record(0, frame("check", "k", "n")),
                           record(1, frame("erase", "k")), record(0, frame("set", "big", b"x" * 40000))))
    write("store", "wait", s(record(0, frame("get", "later", i64(100000))), record(1, frame("set", "later", "1")),
                             record(0, frame("barrier", "b", i64(2), i64(1000))),
                             record(1, frame("barrier", "b", i64(2), i64(1000)))))
    write("store", "job", s(record(0, JOIN), record(1, JOIN), record(0, frame("table")),
                            record(1, frame("heartbeat", "running", i64(1), i64(0), i64(0))),
                            record(0, frame("watch", i64(0), i64(1000))),
                            record(1, frame("report", i64(1), i64(3), i64(2), i64(0), "worker failed")),
                            record(0, frame("leave", i64(1000))), record(1, frame("leave", i64(1000))),
                            record(1, frame("status", "")), record(0, frame("list_runs"))))
    write("store", "raw", s(record(2, HELLO), record(2, AUTH), record(2, frame("set", "a", "b")),
                            record(2, frame("join", "h", i64(0), i64(1), i64(1), "x", i64(0), "", i64(0), i64(0)))))
    # a node rank below -1 (here INT64_MIN, which narrowed to int read as rank 0) once crashed the barrier's close
    write("store", "join_rank_min", s(record(0, frame("join", "h", i64(-2**63), i64(1), i64(1), "x", i64(0), "", i64(0),
                                                      i64(1000)))))
    write("store", "garbage", s(record(2, b"\x00\x00\x10\x01\x02"), record(0, b"\x00\x00\x00\x06\x02\x0a\x00\x00\x00\x05")))


if __name__ == "__main__":
    for t in ("spec", "hostlist", "hosts", "wire", "store"):
        shutil.rmtree(os.path.join(ROOT, t), ignore_errors=True)
        os.makedirs(os.path.join(ROOT, t))
    spec()
    hostlist()
    hosts()
    wire()
    store()
