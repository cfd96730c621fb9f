"""spanprobe.read_report on a report spanprobe wrote (SPANPROBE_BIN, from the repository root):
every array with its units and shape as the HDF5 file holds it, the summary's scalars, the skipped
analyzers with their reasons; a file that is not a report is a ValueError."""
import os
import subprocess
import tempfile
import unittest

import h5py
import numpy as np

import spanprobe


class ReadReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "report.h5")
        subprocess.run([os.environ["SPANPROBE_BIN"], "analyze", "fixtures/dump_recipe/llama.h5", "--out", cls.path,
                        "--metrics", "similarity,growth,cka", "--device", "cpu", "--quiet"], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_arrays_units_shapes(self):
        r = spanprobe.read_report(self.path)
        cos = r.metrics["similarity"]["cosine"]
        self.assertEqual(cos.shape, (3, 3))  # h_0 .. h_2 of the 2-layer fixture
        self.assertEqual(cos.units, "cosine")
        self.assertEqual(cos.shape_desc, "[layer, layer]")
        np.testing.assert_allclose(np.diag(cos.values), 1, atol=1e-5)
        with h5py.File(self.path, "r") as f:  # the values as the file holds them
            for analyzer, arrays in r.metrics.items():
                for name, metric in arrays.items():
                    np.testing.assert_array_equal(metric.values, f[f"metrics/{analyzer}/{name}"][()])

    def test_summary_and_skipped(self):
        r = spanprobe.read_report(self.path)
        mean = r.summary["similarity"]["adjacent_cosine_mean"]
        cos = r.metrics["similarity"]["cosine"].values
        self.assertAlmostEqual(mean, (cos[0, 1] + cos[1, 2]) / 2, places=6)
        self.assertIn("input_sha256", r.provenance)
        self.assertEqual(r.skipped, {})  # every analyzer asked for ran on the dump

    def test_not_a_report(self):
        with self.assertRaisesRegex(ValueError, "spanprobe-report"):
            spanprobe.read_report("fixtures/dump_recipe/llama.h5")


if __name__ == "__main__":
    unittest.main()
