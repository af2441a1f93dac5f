"""dtrain.Comm (python/dtrain/comm.py) on real ranks: run under `dtrain launch` with several workers
(tests/python/CMakeLists.txt: 3 ranks on shared memory, 4 over TCP in 2 pipeline stages). Every rank runs the same tests
in the same order, so the collectives match; a failing rank exits non-zero and the launch fails.

Inputs are small integers, so every expected result is exact in every dtype (float16 and bfloat16
are reduced in float32 and rounded once, which the expected values do the same way).
"""

import os
import sys
import unittest

import numpy as np

import dtrain
from dtrain import ArgumentError, Error, Status

WORLD = dtrain.init()
N, R = WORLD.size, WORLD.rank
NUMPY_TYPES = ["int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
ALL_TYPES = NUMPY_TYPES + ["bfloat16"]
COUNTS = [0, 1, 7, 70001]  # 70001 float64 elements take the large-message path of every engine


def contribution(rank, count, dtype):
    """This rank's input: small integers (non-negative for uint8), as float64."""
    base = np.arange(count) % 9 - (0 if dtype == "uint8" else 4)
    return (base + rank).astype(np.float64)


def as_array(values, dtype):
    """float64 values -> an array of dtype (bfloat16: uint16 bit patterns)."""
    if dtype == "bfloat16":
        return dtrain.to_bfloat16(values.astype(np.float32))
    return values.astype(dtype)


def expected(op, count, dtype):
    """The exact reduction over every rank, rounded the way dtrain rounds it."""
    stack = np.stack([contribution(r, count, dtype) for r in range(N)]) if count else np.zeros((N, 0))
    if dtype in ("int8", "uint8", "int32", "int64"):
        ints = stack.astype(np.int64)
        exact = {"sum": ints.sum(0), "prod": ints.prod(0), "min": ints.min(0), "max": ints.max(0),
                 "avg": np.trunc(ints.sum(0) / N).astype(np.int64)}[op]
        return exact.astype(dtype)  # integer sums and products wrap around
    exact = {"sum": stack.sum(0), "prod": stack.prod(0), "min": stack.min(0), "max": stack.max(0),
             "avg": stack.sum(0) / N}[op]
    return as_array(exact.astype(np.float32) if dtype in ("float16", "bfloat16") else exact, dtype)


def kwargs_for(dtype):
    return {"dtype": "bfloat16"} if dtype == "bfloat16" else {}


class Collectives(unittest.TestCase):
    def test_allreduce_every_dtype_and_op_out_of_place_and_in_place(self):
        for dtype in ALL_TYPES:
            for op in ("sum", "prod", "min", "max", "avg"):
                for count in COUNTS:
                    with self.subTest(dtype=dtype, op=op, count=count):
                        a = as_array(contribution(R, count, dtype), dtype)
                        before = a.copy()
                        got = dtrain.allreduce(a, op=op, **kwargs_for(dtype))
                        np.testing.assert_array_equal(got, expected(op, count, dtype))
                        np.testing.assert_array_equal(a, before)  # out of place leaves the input alone
                        same = WORLD.allreduce(a, op=op, out=a, **kwargs_for(dtype))
                        self.assertIs(same, a)
                        np.testing.assert_array_equal(a, expected(op, count, dtype))

    def test_allreduce_into_a_given_array_keeps_shapes(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4) + R
        out = np.empty(12, dtype=np.float32)
        self.assertIs(dtrain.allreduce(a, op="max", out=out), out)
        np.testing.assert_array_equal(out, np.arange(12) + N - 1)
        self.assertEqual(dtrain.allreduce(a).shape, (3, 4))
        zero_d = dtrain.allreduce(np.array(2.0 + R))
        self.assertEqual(zero_d.shape, ())
        self.assertEqual(float(zero_d), 2.0 * N + N * (N - 1) / 2)

    def test_in_place_on_a_view_writes_the_parents_memory(self):
        parent = np.zeros(10, dtype=np.int64)
        parent[2:5] = R + 1
        view = parent[2:5]
        dtrain.allreduce(view, out=view)  # no copy: the library writes where the view points
        np.testing.assert_array_equal(parent[2:5], [N * (N + 1) // 2] * 3)
        self.assertEqual(parent[0], 0)

    def test_broadcast_from_every_root(self):
        for dtype in ALL_TYPES:
            for root in range(N):
                with self.subTest(dtype=dtype, root=root):
                    mine = as_array(contribution(R, 33, dtype), dtype)
                    want = as_array(contribution(root, 33, dtype), dtype)
                    np.testing.assert_array_equal(dtrain.broadcast(mine, root=root, **kwargs_for(dtype)), want)
                    np.testing.assert_array_equal(mine, as_array(contribution(R, 33, dtype), dtype))
                    dtrain.broadcast(mine, root=root, out=mine, **kwargs_for(dtype))
                    np.testing.assert_array_equal(mine, want)

    def test_allgather_concatenates_in_rank_order(self):
        for dtype in ALL_TYPES:
            with self.subTest(dtype=dtype):
                mine = as_array(contribution(R, 5, dtype), dtype)
                want = np.concatenate([as_array(contribution(r, 5, dtype), dtype) for r in range(N)])
                np.testing.assert_array_equal(dtrain.allgather(mine, **kwargs_for(dtype)), want)
        rows = WORLD.allgather(np.full((2, 3), R, dtype=np.int32))
        self.assertEqual(rows.shape, (2 * N, 3))
        np.testing.assert_array_equal(rows[:, 0], np.repeat(np.arange(N), 2))
        np.testing.assert_array_equal(dtrain.allgather(np.array(R)), np.arange(N))

    def test_allgather_in_place_in_this_ranks_block(self):
        out = np.full(4 * N, -1.0)
        block = out[4 * R:4 * R + 4]
        block[:] = R
        self.assertIs(dtrain.allgather(block, out=out), out)
        np.testing.assert_array_equal(out, np.repeat(np.arange(N, dtype=np.float64), 4))

    def test_reduce_scatter_gives_each_rank_its_block(self):
        for dtype in ALL_TYPES:
            for op in ("sum", "max", "avg"):
                with self.subTest(dtype=dtype, op=op):
                    a = as_array(contribution(R, 6 * N, dtype), dtype)
                    want = expected(op, 6 * N, dtype)[6 * R:6 * R + 6]
                    np.testing.assert_array_equal(dtrain.reduce_scatter(a, op=op, **kwargs_for(dtype)), want)
        a = np.ones((2 * N, 3), dtype=np.float64)
        self.assertEqual(WORLD.reduce_scatter(a).shape, (2, 3))

    def test_reduce_scatter_in_place_in_this_ranks_block(self):
        a = np.arange(3 * N, dtype=np.int32)
        block = a[3 * R:3 * R + 3]
        self.assertIs(dtrain.reduce_scatter(a, out=block), block)
        np.testing.assert_array_equal(a[3 * R:3 * R + 3], (np.arange(3 * R, 3 * R + 3) * N))

    def test_barrier(self):
        dtrain.barrier()
        WORLD.barrier()


class Arguments(unittest.TestCase):
    """Refused on the calling rank (every rank makes the same mistake): nothing is sent, the
    communicator stays usable."""

    def refuses(self, fn, *texts, status=Status.INVALID_ARGUMENT):
        with self.assertRaises(Error) as cm:
            fn()
        self.assertEqual(cm.exception.status, status)
        for text in texts:
            self.assertIn(text, str(cm.exception))
        return cm.exception

    def test_non_contiguous_arrays_are_refused_not_copied(self):
        a = np.zeros((4, 4))
        e = self.refuses(lambda: dtrain.allreduce(a[:, 1]), "not C-contiguous", "ascontiguousarray")
        self.assertIsInstance(e, ArgumentError)
        self.assertIsInstance(e, ValueError)
        self.refuses(lambda: dtrain.allreduce(np.zeros(4), out=np.zeros(8)[::2]), "out is not C-contiguous")
        self.refuses(lambda: dtrain.broadcast(a.T), "not C-contiguous")

    def test_other_bad_arrays(self):
        self.refuses(lambda: dtrain.allreduce([1.0, 2.0]), "numpy array, not list")
        ro = np.zeros(3)
        ro.flags.writeable = False
        self.refuses(lambda: dtrain.allreduce(ro, out=ro), "read-only")
        np.testing.assert_array_equal(dtrain.allreduce(ro), np.zeros(3))  # a read-only input is fine
        self.refuses(lambda: dtrain.allreduce(np.zeros(3), out=np.zeros(4)), "4 elements", "needs 3")
        self.refuses(lambda: dtrain.allreduce(np.zeros(3), out=np.zeros(3, np.float32)), "dtype float32")
        self.refuses(lambda: dtrain.allgather(np.zeros(3), out=np.zeros(3)), f"needs {3 * N}")
        self.refuses(lambda: dtrain.reduce_scatter(np.zeros(N + 1)), "must divide by the communicator size")

    def test_unknown_dtypes_and_ops(self):
        self.refuses(lambda: dtrain.allreduce(np.zeros(3, np.uint16)), "uint16 are not supported", "bfloat16")
        self.refuses(lambda: dtrain.allreduce(np.zeros(3, np.complex64)), "complex64")
        self.refuses(lambda: dtrain.allreduce(np.zeros(3, ">f8")), "byte order")
        self.refuses(lambda: dtrain.allreduce(np.zeros(3), dtype="float32"), "does not match")
        self.refuses(lambda: dtrain.allreduce(np.zeros(3, np.float32), dtype="bfloat16"), "2-byte")
        self.refuses(lambda: dtrain.allreduce(np.zeros(3), op="mean"), "op='mean'")

    def test_the_librarys_own_checks_carry_its_message(self):
        e = self.refuses(lambda: dtrain.broadcast(np.zeros(3), root=N), "broadcast")
        self.assertNotIsInstance(e, ArgumentError)  # from the library, not the Python layer
        self.assertEqual(e.call, "broadcast")
        self.assertTrue(e.message)
        # overlapping buffers other than the in-place forms
        buf = np.zeros(8)
        self.refuses(lambda: dtrain.allreduce(buf[0:4], out=buf[2:6]), "allreduce")
        np.testing.assert_array_equal(dtrain.allreduce(np.ones(2)), [N, N])  # still usable


class Lifetime(unittest.TestCase):
    def test_init_returns_the_same_world(self):
        self.assertIs(dtrain.init(), WORLD)
        self.assertIs(dtrain.world(), WORLD)
        self.assertEqual((WORLD.rank, WORLD.size), (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])))
        self.assertIn(f"rank {R}/{N}", repr(WORLD))

    def test_world_again_after_finalize(self):
        global WORLD
        dtrain.finalize()
        with self.assertRaisesRegex(Error, "call dtrain.init\\(\\) first"):
            dtrain.barrier()
        with self.assertRaisesRegex(Error, "the world communicator was destroyed"):
            WORLD.barrier()
        WORLD = dtrain.init()
        np.testing.assert_array_equal(dtrain.allreduce(np.array([R], np.int32)), [N * (N - 1) // 2])

    def test_plan_matches_the_communicator(self):
        p = dtrain.plan()
        self.assertEqual((p.rank, p.world_size), (R, N))
        self.assertEqual(p.dp_size * p.pp_size * p.tp_size, N)
        self.assertEqual(p.batch.global_, 12)
        self.assertEqual(p.batch.per_replica, 12 // p.dp_size)
        self.assertEqual(p.name, "python-comm")
        mine = [g for g in p.parallel.groups["data"] if R in g]
        self.assertEqual(len(mine), 1)
        self.assertEqual((len(mine[0]), mine[0].index(R)), (p.dp_size, p.dp_rank))


class PointToPoint(unittest.TestCase):
    """Groups and point-to-point, when the loaded library has them; the clear error when not."""

    def setUp(self):
        self.info = dtrain.library_info()

    def test_missing_functions_say_the_library_is_too_old(self):
        for name, call in (("dtrain_send", lambda: dtrain.send(np.zeros(1), 0)),
                           ("dtrain_recv", lambda: dtrain.recv(np.zeros(1), 0)),
                           ("dtrain_sendrecv", lambda: dtrain.sendrecv(np.zeros(1), 0, np.zeros(1), 0)),
                           ("dtrain_comm_split", lambda: dtrain.split(0)),
                           ("dtrain_comm_init_group_from_env", lambda: dtrain.init_group("data"))):
            if name in self.info.optional:
                continue
            with self.subTest(name=name), self.assertRaises(Error) as cm:
                call()
            self.assertEqual(cm.exception.status, Status.UNSUPPORTED)
            self.assertIn(f"has no {name} (too old", str(cm.exception))

    def test_ring_with_sendrecv_and_send_recv(self):
        self.assertIn("dtrain_sendrecv", self.info.optional, f"{self.info.path} exports no dtrain_sendrecv")
        got = dtrain.sendrecv(np.full(5, R, np.int64), (R + 1) % N, np.empty(5, np.int64), (R - 1) % N, 7, 7)
        np.testing.assert_array_equal(got, np.full(5, (R - 1) % N))
        # a chain: rank 0 only sends, the last rank only receives
        out = np.full(3, -1.0)
        dtrain.sendrecv(np.full(3, float(R)), R + 1 if R + 1 < N else None, out if R else None,
                        R - 1 if R else None)
        np.testing.assert_array_equal(out, np.full(3, R - 1.0) if R else np.full(3, -1.0))
        if R == 0:
            dtrain.send(np.arange(4, dtype=np.float32), 1, tag=3)
        elif R == 1:
            np.testing.assert_array_equal(dtrain.recv(np.empty(4, np.float32), 0, tag=3), np.arange(4))
        dtrain.barrier()

    def test_split_and_groups(self):
        self.assertIn("dtrain_comm_split", self.info.optional, f"{self.info.path} exports no dtrain_comm_split")
        with dtrain.split(R % 2, key=-R) as half:
            members = [r for r in range(N) if r % 2 == R % 2]
            self.assertEqual(half.size, len(members))
            self.assertEqual(half.rank, sorted(members, reverse=True).index(R))
            np.testing.assert_array_equal(half.allreduce(np.array([R])), [sum(members)])
        none = dtrain.split(None if R == 0 else 1)
        self.assertEqual(none is None, R == 0)
        if none is not None:
            self.assertEqual(none.size, N - 1)
            none.destroy()
            with self.assertRaises(Error):
                none.barrier()
        p = dtrain.plan()
        for kind, rank, size in (("data", p.dp_rank, p.dp_size), ("pipeline", p.pp_rank, p.pp_size),
                                 ("tensor", p.tp_rank, p.tp_size)):
            with self.subTest(kind=kind), dtrain.init_group(kind) as group:
                self.assertEqual((group.rank, group.size), (rank, size))
                members = [g for g in p.parallel.groups[kind] if R in g][0]
                np.testing.assert_array_equal(group.allgather(np.array([R])), members)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1 if R else 2).result
    sys.stdout.flush()
    sys.exit(0 if result.wasSuccessful() else 1)
