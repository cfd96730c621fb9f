"""spanprobe.capture on a small PyTorch model (no transformers: blocks and down projections named
explicitly), read back by `spanprobe analyze`: the dump's layers equal the hooks' tensors computed
by hand, float16 dumps hold them to float16 precision, and a value beyond float16's range is a
ValueError that leaves no file. Skipped, with one line, where torch is not installed."""
import os
import subprocess
import tempfile
import unittest

import h5py
import numpy as np

import spanprobe

try:
    import torch
except ImportError:  # Debian's python3-torch is optional
    torch = None


def tiny_model(scale=1.0):
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)
            self.up = torch.nn.Linear(8, 16)
            self.down = torch.nn.Linear(16, 8)

        def forward(self, x):
            return x + scale * self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(32, 8)
            self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])
            self.head = torch.nn.Linear(8, 32)

        def forward(self, ids):
            x = self.embed(ids)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    return Model().eval()


@unittest.skipIf(torch is None, "torch is not installed (Debian's python3-torch): capture not tested")
class Capture(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.ids = torch.randint(0, 32, (4, 12), generator=torch.Generator().manual_seed(1))

    def tearDown(self):
        self.dir.cleanup()

    def capture(self, model, name, **options):
        path = os.path.join(self.dir.name, name)
        options.setdefault("batch_size", 3)  # two batches, the second short: streamed
        spanprobe.capture(model, self.ids, path, blocks=model.blocks, down_projs=[b.down for b in model.blocks],
                          vocab_size=32, **options)
        return path

    def test_layers_and_analyze(self):
        model = tiny_model()
        path = self.capture(model, "dump.h5")
        with torch.no_grad():  # the layer outputs, by hand
            h = [model.embed(self.ids)]
            for block in model.blocks:
                h.append(block(h[-1]))
            latent = torch.nn.functional.gelu(model.blocks[1].up(model.blocks[1].norm(h[1])))
        with h5py.File(path, "r") as f:
            self.assertEqual(f.attrs["format"], "spanprobe-activations")
            np.testing.assert_allclose(f["hidden/0"][3], h[3].reshape(-1, 8).numpy(), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(f["ffn_latent"][1], latent.reshape(-1, 16).numpy(), rtol=1e-6, atol=1e-6)
        half = self.capture(model, "half.h5", dtype=np.float16)
        with h5py.File(half, "r") as f:
            np.testing.assert_allclose(f["hidden/0"][3], h[3].reshape(-1, 8).numpy(), rtol=2e-3, atol=2e-3)
        report = os.path.join(self.dir.name, "report.h5")
        subprocess.run([os.environ["SPANPROBE_BIN"], "analyze", path, "--out", report, "--metrics",
                        "similarity,growth", "--device", "cpu", "--quiet"], check=True)
        r = spanprobe.read_report(report)
        self.assertEqual(r.metrics["similarity"]["cosine"].shape, (4, 4))

    def test_float16_overflow(self):
        with self.assertRaisesRegex(ValueError, "float16"):
            self.capture(tiny_model(scale=1e6), "big.h5", dtype=np.float16)
        self.assertEqual(os.listdir(self.dir.name), [])  # no file, no temporary


if __name__ == "__main__":
    unittest.main()
