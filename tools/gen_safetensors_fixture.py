#!/usr/bin/env python3
"""Writes fixtures/safetensors/reference.safetensors with the reference implementation (the Python
`safetensors` package), for tests/test_safetensors.c to read back: one tensor of each float dtype
with known values (half subnormals, infinities and NaN among them) and one integer tensor.

Run from the repository root with a Python that has safetensors, torch (for BF16) and numpy:
    python tools/gen_safetensors_fixture.py
The committed file was written with safetensors 0.8.0, torch 2.15.0 and numpy 2.4.6; the versions
used are also stored in the file's __metadata__ ("generator").
"""
import math
import os

import numpy
import safetensors
import torch
from safetensors.torch import save_file

OUT = "fixtures/safetensors/reference.safetensors"

# Keep in step with the expected values in tests/test_safetensors.c.
TENSORS = {
    "f32": torch.tensor([[1.5, -2.25, 3.0], [0.1, -7.0, 1e-3]], dtype=torch.float32),
    # 65504 is the largest half, 2^-14 the smallest normal, 2^-24 and 3 * 2^-24 subnormals; 0.1 is rounded
    "f16": torch.tensor([1.0, -2.5, 65504.0, 2.0**-14, 2.0**-24, 3 * 2.0**-24, 0.1, -0.0,
                         math.inf, -math.inf, math.nan], dtype=torch.float16),
    # values bfloat16 holds exactly (the largest finite one, and a subnormal)
    "bf16": torch.tensor([[1.0, -3.0], [0.15625, 3.3895313892515355e38], [2.0**-133, -0.5]], dtype=torch.bfloat16),
    "f64": torch.tensor([0.1, -2.5, 1e10], dtype=torch.float64),
    "i32": torch.tensor([1, -2, 3], dtype=torch.int32),
}


def main():
    versions = f"safetensors {safetensors.__version__}, torch {torch.__version__.split('+')[0]}, numpy {numpy.__version__}"
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(TENSORS, OUT, metadata={"format": "pt", "generator": f"tools/gen_safetensors_fixture.py ({versions})"})
    print(f"{OUT}: {os.path.getsize(OUT)} bytes ({versions})")


if __name__ == "__main__":
    main()
