"""The job's parallel layout and batch plan, from the environment `dtrain launch` gives a worker
(dtrain-launch(1), WORKER ENVIRONMENT), checked before anything is built."""
import os
import sys

from schedule import SCHEDULES


class LayoutError(Exception):
    """A missing or inconsistent plan: the worker exits 2 with this message."""


def _int(name):
    text = os.environ.get(name)
    if text is None:
        raise LayoutError(f"{name} is not set: run this worker under `dtrain launch` with a batch section that "
                          "has a dataset size (see examples/jobs/torch-pipeline.json)")
    try:
        return int(text)
    except ValueError:
        raise LayoutError(f"{name}={text!r} is not an integer") from None


class Layout:
    def __init__(self):
        self.pp, self.pp_size = _int("DTRAIN_PP_RANK"), _int("DTRAIN_PP_SIZE")
        self.dp, self.dp_size = _int("DTRAIN_DP_RANK"), _int("DTRAIN_DP_SIZE")
        tp = _int("DTRAIN_TP_SIZE")
        if tp != 1:
            raise LayoutError(f"DTRAIN_TP_SIZE={tp}: this example splits the model over pipeline stages only; "
                              "set parallel.tensor to 1")
        self.schedule = os.environ.get("DTRAIN_PP_SCHEDULE", "1f1b")
        if self.schedule not in SCHEDULES:
            raise LayoutError(f"DTRAIN_PP_SCHEDULE={self.schedule!r}: expected gpipe or 1f1b")
        self.global_batch = _int("DTRAIN_GLOBAL_BATCH")
        self.per_replica = _int("DTRAIN_PER_REPLICA_BATCH")
        self.micro = _int("DTRAIN_MICRO_BATCHES")
        self.micro_size = _int("DTRAIN_MICRO_BATCH_SIZE")
        self.iterations = _int("DTRAIN_ITERATIONS_PER_EPOCH")
        self.epochs = _int("DTRAIN_EPOCHS")
        self.dataset = _int("DTRAIN_DATASET_SIZE")
        if self.micro * self.micro_size != self.per_replica or self.per_replica * self.dp_size != self.global_batch:
            raise LayoutError(f"inconsistent batch plan: {self.micro} micro-batches x {self.micro_size} != "
                              f"{self.per_replica} per replica, or x {self.dp_size} replicas != {self.global_batch}")
        if min(self.micro, self.iterations, self.epochs, self.dataset) < 1:
            raise LayoutError("the batch plan has no micro-batches, iterations, epochs or samples")

    def stage_layers(self, layers):
        """[first, end) of this stage's dense layers: contiguous, the later stages one more when uneven."""
        if self.pp_size > layers:
            raise LayoutError(f"{self.pp_size} pipeline stages but only {layers} layers: give --layers "
                              f"{self.pp_size} or more")
        base, extra = divmod(layers, self.pp_size)
        sizes = [base + (1 if s >= self.pp_size - extra else 0) for s in range(self.pp_size)]
        first = sum(sizes[:self.pp])
        return first, first + sizes[self.pp]


def load():
    try:
        return Layout()
    except LayoutError as e:
        print(f"torch_pipeline: {e}", file=sys.stderr)
        sys.exit(2)
