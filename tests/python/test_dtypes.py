"""python/dtrain/dtypes.py: numpy dtypes and op names -> the C ABI's codes, the bfloat16 helpers.
No library is loaded."""

import unittest

import numpy as np

from dtrain import ArgumentError, DType, Op, from_bfloat16, to_bfloat16
from dtrain.dtypes import dtype_code, op_code


class DTypes(unittest.TestCase):
    def test_numpy_types_map_to_the_same_names(self):
        for name in ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"):
            self.assertEqual(dtype_code(np.zeros(1, name), None, "t"), DType[name.upper()])
            self.assertEqual(dtype_code(np.zeros(1, name), name, "t"), DType[name.upper()])
        self.assertEqual([int(t) for t in DType], list(range(10)))  # dtrain_dtype_t's values
        self.assertEqual((DType.BOOL, DType.INT16), (8, 9))

    def test_bfloat16_from_two_byte_integers_when_asked(self):
        self.assertEqual(dtype_code(np.zeros(1, np.uint16), "bfloat16", "t"), DType.BFLOAT16)
        self.assertEqual(dtype_code(np.zeros(1, np.int16), DType.BFLOAT16, "t"), DType.BFLOAT16)
        with self.assertRaisesRegex(ArgumentError, "2-byte elements"):
            dtype_code(np.zeros(1, np.float32), "bfloat16", "t")
        with self.assertRaisesRegex(ArgumentError, "float16"):  # a float16 array is not bfloat16 bits
            dtype_code(np.zeros(1, np.float16), "bfloat16", "t")

    def test_refusals_say_what_to_do(self):
        cases = [(np.zeros(1, np.uint16), None, "pass dtype='bfloat16'"),
                 (np.zeros(1, ">i4"), None, "non-native byte order"),
                 (np.zeros(1, np.uint32), None, "uint32 are not supported"),
                 (np.zeros(1, np.float64), "float32", "does not match the array's float64"),
                 (np.zeros(1, np.float64), "complex", "not one of dtrain's types")]
        for a, dtype, text in cases:
            with self.subTest(text=text), self.assertRaises(ArgumentError) as cm:
                dtype_code(a, dtype, "allreduce")
            self.assertIn(text, str(cm.exception))
            self.assertIn("dtrain allreduce:", str(cm.exception))

    def test_ops(self):
        for op in Op:
            self.assertEqual(op_code(op.name.lower(), "t"), op)
            self.assertEqual(op_code(op, "t"), op)
        self.assertEqual(op_code("AVG", "t"), Op.AVG)
        self.assertEqual([int(op) for op in Op], list(range(8)))  # dtrain_op_t's values
        with self.assertRaisesRegex(ArgumentError, "one of sum, prod, min, max, avg, band, bor, bxor"):
            op_code("mean", "t")


class BFloat16(unittest.TestCase):
    def test_round_to_nearest_even(self):
        # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0)
        values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 840.0, 65504.0, 0.0, -0.0], np.float32)
        bits = to_bfloat16(values)
        self.assertEqual(bits.dtype, np.uint16)
        self.assertEqual(bits.tolist(), [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x4452, 0x4780, 0x0000, 0x8000])
        np.testing.assert_array_equal(from_bfloat16(bits), [1.0, 1.0, 1 + 2**-6, -2.5, 840.0, 65536.0, 0.0, -0.0])

    def test_exact_values_round_trip_and_nan_stays_nan(self):
        exact = np.arange(-256, 257, dtype=np.float32)
        np.testing.assert_array_equal(from_bfloat16(to_bfloat16(exact)), exact)
        special = from_bfloat16(to_bfloat16(np.array([np.nan, np.inf, -np.inf], np.float32)))
        self.assertTrue(np.isnan(special[0]))
        self.assertEqual(special[1:].tolist(), [np.inf, -np.inf])


if __name__ == "__main__":
    unittest.main(verbosity=2)
