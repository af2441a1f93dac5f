"""dtrain.plan() (python/dtrain/job.py): the worker's plan from an environment and from the JSON of a
real `dtrain plan --json` (DTRAIN_BIN); errors name the variable or file. No library is loaded."""

import json
import os
import subprocess
import tempfile
import unittest

import dtrain
from dtrain import Error, Status

LAUNCH_ENV = {
    "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
    "DTRAIN_NODE_RANK": "1", "DTRAIN_NNODES": "2", "DTRAIN_RUN_ID": "job-7", "DTRAIN_GENERATION": "2",
    "DTRAIN_DP_RANK": "2", "DTRAIN_DP_SIZE": "4", "DTRAIN_PP_RANK": "1", "DTRAIN_PP_SIZE": "2",
    "DTRAIN_TP_RANK": "0", "DTRAIN_TP_SIZE": "1", "DTRAIN_PARALLEL_ORDER": "tp-dp-pp", "DTRAIN_PP_SCHEDULE": "1f1b",
    "DTRAIN_GLOBAL_BATCH": "64", "DTRAIN_PER_REPLICA_BATCH": "16", "DTRAIN_MICRO_BATCHES": "4",
    "DTRAIN_MICRO_BATCH_SIZE": "4", "DTRAIN_EPOCHS": "3", "DTRAIN_DATASET_SIZE": "1000",
    "DTRAIN_ITERATIONS_PER_EPOCH": "16", "DTRAIN_TOTAL_ITERATIONS": "48",
}


class FromEnvironment(unittest.TestCase):
    def test_every_field(self):
        p = dtrain.plan(LAUNCH_ENV)
        self.assertEqual((p.rank, p.world_size, p.local_rank, p.local_world_size), (5, 8, 1, 4))
        self.assertEqual((p.node_rank, p.nnodes, p.run_id, p.generation), (1, 2, "job-7", 2))
        self.assertEqual((p.dp_rank, p.dp_size, p.pp_rank, p.pp_size, p.tp_rank, p.tp_size), (2, 4, 1, 2, 0, 1))
        self.assertEqual((p.parallel.data, p.parallel.pipeline, p.parallel.tensor), (4, 2, 1))
        self.assertEqual((p.parallel.order, p.parallel.schedule), ("tp-dp-pp", "1f1b"))
        self.assertEqual(p.batch, dtrain.Batch(global_=64, per_replica=16, micro_batches=4, micro_batch_size=4,
                                               epochs=3, dataset_size=1000, iterations_per_epoch=16,
                                               total_iterations=48))
        self.assertIsNone(p.path)
        self.assertEqual(p.json, {})

    def test_without_a_batch_section_and_optional_variables(self):
        p = dtrain.plan({"RANK": "0", "WORLD_SIZE": "2"})
        self.assertIsNone(p.batch)
        self.assertEqual((p.dp_rank, p.dp_size, p.pp_size, p.tp_size, p.local_world_size), (0, 2, 1, 1, 2))
        p = dtrain.plan({"RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "tr", "GROUP_RANK": "3"})
        self.assertEqual((p.run_id, p.node_rank, p.dp_rank), ("tr", 3, 1))

    def test_errors_name_the_variable(self):
        cases = [({}, "WORLD_SIZE is not set"),
                 ({"WORLD_SIZE": "2"}, "RANK is not set"),
                 ({"WORLD_SIZE": "two", "RANK": "0"}, "WORLD_SIZE='two': expected an integer >= 1"),
                 ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2 is not below WORLD_SIZE=2"),
                 ({"WORLD_SIZE": "2", "RANK": "-1"}, "RANK='-1': expected an integer >= 0"),
                 (dict(LAUNCH_ENV, DTRAIN_EPOCHS="x"), "DTRAIN_EPOCHS='x'"),
                 (dict(LAUNCH_ENV, DTRAIN_PLAN="/nonexistent/plan.json"), "DTRAIN_PLAN=/nonexistent/plan.json: "
                                                                            "cannot read it")]
        for env, text in cases:
            with self.subTest(text=text), self.assertRaises(Error) as cm:
                dtrain.plan(env)
            self.assertEqual(cm.exception.status, Status.CONFIG)
            self.assertIn(text, str(cm.exception))

    def test_bad_plan_files(self):
        with tempfile.TemporaryDirectory() as d:
            for text, want in (("{not json", "not valid JSON"), ("[1, 2]", "expected a JSON object"),
                               ('{"batch": {"global": 4}}', "/batch has no per_replica")):
                path = os.path.join(d, "plan.json")
                with open(path, "w") as f:
                    f.write(text)
                with self.subTest(text=text), self.assertRaises(Error) as cm:
                    dtrain.plan({"RANK": "0", "WORLD_SIZE": "1", "DTRAIN_PLAN": path})
                self.assertIn(want, str(cm.exception))


class FromPlanJson(unittest.TestCase):
    """The JSON `dtrain plan --json` prints is what DTRAIN_PLAN points at."""

    def plan_json(self, spec):
        with tempfile.TemporaryDirectory() as d:
            job = os.path.join(d, "job.json")
            with open(job, "w") as f:
                json.dump(spec, f)
            env = {"PATH": "/usr/bin:/bin", "HOME": d, "LC_ALL": "C", "DTRAIN_TEST_GPUS": "0"}
            r = subprocess.run([os.environ["DTRAIN_BIN"], "plan", "--json", job], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            path = os.path.join(d, "plan.json")
            with open(path, "w") as f:
                f.write(r.stdout)
            return dtrain.plan({"RANK": "3", "WORLD_SIZE": "4", "DTRAIN_PLAN": path})

    def test_groups_name_and_batch_from_the_json(self):
        p = self.plan_json({"name": "pp-dp", "command": ["python3", "train.py"],
                            "cluster": {"procs_per_instance": 4},
                            "parallel": {"pipeline": 2}, "batch": {"per_replica": 8, "dataset_size": 100}})
        self.assertEqual(p.name, "pp-dp")
        self.assertEqual(p.command, ("python3", "train.py"))
        self.assertEqual((p.parallel.pipeline, p.parallel.data, p.dp_size, p.pp_size), (2, 2, 2, 2))
        self.assertEqual(sorted(sum(p.parallel.groups["data"], [])), [0, 1, 2, 3])
        self.assertEqual(len(p.parallel.groups["pipeline"]), 2)
        self.assertEqual((p.batch.global_, p.batch.per_replica, p.batch.iterations_per_epoch), (16, 8, 7))
        self.assertEqual(p.json["world_size"], 4)

    def test_no_batch_section(self):
        self.assertIsNone(self.plan_json({"command": ["true"], "cluster": {"procs_per_instance": 4}}).batch)


if __name__ == "__main__":
    unittest.main(verbosity=2)
