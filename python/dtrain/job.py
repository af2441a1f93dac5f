"""dtrain.plan(): the job's plan as a worker sees it, from the environment `dtrain launch` sets.

The per-worker facts (ranks, sizes, run id, generation, the data/pipeline/tensor coordinates and the
batch numbers) come from the worker environment (dtrain-launch(1), ENVIRONMENT); the rest (job name,
command, the groups of every kind, the rank table) from the plan JSON that ``DTRAIN_PLAN`` names (the
form of ``dtrain plan --json``), when it is set. Pure Python: no library is loaded.
"""

import dataclasses
import json
import os
from typing import Optional

from .errors import Error, Status

__all__ = ["Plan", "Batch", "Parallel", "plan"]


@dataclasses.dataclass(frozen=True)
class Batch:
    """The batch math (dtrain-job(5), batch). ``global_`` is the global batch: replicas x
    ``per_replica``. Fields the job spec leaves unknown (no dataset size) are None."""

    global_: int
    per_replica: int
    micro_batches: int
    micro_batch_size: int
    epochs: int
    dataset_size: Optional[int] = None
    iterations_per_epoch: Optional[int] = None
    total_iterations: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Parallel:
    """The parallel layout: degrees, rank order, pipeline schedule and (from DTRAIN_PLAN) the
    groups, ``groups["data"]`` etc. being lists of world ranks."""

    data: int = 1
    pipeline: int = 1
    tensor: int = 1
    order: str = ""
    schedule: str = ""
    groups: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Plan:
    """This worker's view of the job. ``dp_rank``/``dp_size`` are its replica and the number of
    replicas (``data`` group), ``pp_*`` its pipeline stage, ``tp_*`` its tensor shard. ``batch`` is
    None when the job has no batch section. ``json`` is the whole plan JSON (empty without
    DTRAIN_PLAN)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    nnodes: int
    run_id: str
    generation: int
    dp_rank: int
    dp_size: int
    pp_rank: int
    pp_size: int
    tp_rank: int
    tp_size: int
    parallel: Parallel
    batch: Optional[Batch]
    name: str = ""
    command: tuple = ()
    path: Optional[str] = None
    json: dict = dataclasses.field(default_factory=dict, repr=False)


class _Env:
    """Typed reads of the environment, with errors that name the variable."""

    def __init__(self, environ):
        self.environ = environ

    def text(self, *names, default=None):
        for name in names:
            value = self.environ.get(name, "")
            if value:
                return value
        if default is None:
            raise Error(Status.CONFIG, f"{names[0]} is not set: run the worker under `dtrain launch` (see "
                        f"dtrain-launch(1), ENVIRONMENT)", "plan")
        return default

    def integer(self, *names, default=None, minimum=0):
        value = self.text(*names, default="" if default is not None else None)
        if value == "":
            return default
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or number < minimum:
            raise Error(Status.CONFIG, f"{names[0]}={value!r}: expected an integer >= {minimum}", "plan")
        return number


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise Error(Status.CONFIG, f"DTRAIN_PLAN={path}: cannot read it: {e.strerror}", "plan") from None
    except ValueError as e:
        raise Error(Status.CONFIG, f"DTRAIN_PLAN={path}: not valid JSON: {e}", "plan") from None
    if not isinstance(doc, dict):
        raise Error(Status.CONFIG, f"DTRAIN_PLAN={path}: expected a JSON object", "plan")
    return doc


def _batch(env, doc):
    if env.environ.get("DTRAIN_GLOBAL_BATCH"):
        return Batch(global_=env.integer("DTRAIN_GLOBAL_BATCH", minimum=1),
                     per_replica=env.integer("DTRAIN_PER_REPLICA_BATCH", minimum=1),
                     micro_batches=env.integer("DTRAIN_MICRO_BATCHES", minimum=1),
                     micro_batch_size=env.integer("DTRAIN_MICRO_BATCH_SIZE", minimum=1),
                     epochs=env.integer("DTRAIN_EPOCHS", minimum=1),
                     dataset_size=env.integer("DTRAIN_DATASET_SIZE", default=0) or None,
                     iterations_per_epoch=env.integer("DTRAIN_ITERATIONS_PER_EPOCH", default=0) or None,
                     total_iterations=env.integer("DTRAIN_TOTAL_ITERATIONS", default=0) or None)
    b = doc.get("batch")
    if not isinstance(b, dict):
        return None
    try:
        return Batch(global_=b["global"], per_replica=b["per_replica"], micro_batches=b["micro_batches"],
                     micro_batch_size=b["micro_batch_size"], epochs=b["epochs"], dataset_size=b.get("dataset_size"),
                     iterations_per_epoch=b.get("iterations_per_epoch"), total_iterations=b.get("total_iterations"))
    except KeyError as e:
        raise Error(Status.CONFIG, f"DTRAIN_PLAN: /batch has no {e.args[0]} (not a plan of dtrain plan --json?)",
                    "plan") from None


def plan(environ=None):
    """The Plan from ``environ`` (default ``os.environ``). Raises dtrain.Error (Status.CONFIG)
    naming the variable when one is missing or malformed, or when DTRAIN_PLAN cannot be read."""
    env = _Env(os.environ if environ is None else environ)
    path = env.environ.get("DTRAIN_PLAN") or None
    doc = _read_json(path) if path else {}
    world = env.integer("WORLD_SIZE", minimum=1)
    rank = env.integer("RANK")
    if rank >= world:
        raise Error(Status.CONFIG, f"RANK={rank} is not below WORLD_SIZE={world}", "plan")
    p = doc.get("parallel") if isinstance(doc.get("parallel"), dict) else {}
    dp_size = env.integer("DTRAIN_DP_SIZE", default=p.get("data", world), minimum=1)
    pp_size = env.integer("DTRAIN_PP_SIZE", default=p.get("pipeline", 1), minimum=1)
    tp_size = env.integer("DTRAIN_TP_SIZE", default=p.get("tensor", 1), minimum=1)
    parallel = Parallel(data=dp_size, pipeline=pp_size, tensor=tp_size,
                        order=env.text("DTRAIN_PARALLEL_ORDER", default=p.get("order", "")),
                        schedule=env.text("DTRAIN_PP_SCHEDULE", default=p.get("schedule", "")),
                        groups=p.get("groups", {}))
    return Plan(rank=rank, world_size=world,
                local_rank=env.integer("LOCAL_RANK", default=rank),
                local_world_size=env.integer("LOCAL_WORLD_SIZE", default=world, minimum=1),
                node_rank=env.integer("DTRAIN_NODE_RANK", "GROUP_RANK", default=0),
                nnodes=env.integer("DTRAIN_NNODES", "GROUP_WORLD_SIZE", default=1, minimum=1),
                run_id=env.text("DTRAIN_RUN_ID", "TORCHELASTIC_RUN_ID", default=""),
                generation=env.integer("DTRAIN_GENERATION", "TORCHELASTIC_RESTART_COUNT", default=0),
                dp_rank=env.integer("DTRAIN_DP_RANK", default=rank if dp_size == world else 0), dp_size=dp_size,
                pp_rank=env.integer("DTRAIN_PP_RANK", default=0), pp_size=pp_size,
                tp_rank=env.integer("DTRAIN_TP_RANK", default=0), tp_size=tp_size,
                parallel=parallel, batch=_batch(env, doc), name=doc.get("name", ""),
                command=tuple(doc.get("command", ())), path=path, json=doc)
