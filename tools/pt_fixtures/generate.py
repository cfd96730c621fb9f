"""Writes the small PyTorch checkpoints of fixtures/pt/ with torch.save, and what a reader must find
in them (expected.json): every tensor's dtype, shape and values, and the other values of each file.

Run in a virtual environment with the pinned torch (requirements.txt, checked by tools/pins.py; CI
never runs this):
    python3 -m venv .venv-ref && .venv-ref/bin/pip install -r tools/pt_fixtures/requirements.txt
    .venv-ref/bin/python tools/pt_fixtures/generate.py fixtures/pt
Deterministic: fixed seeds, fixed values (the archives' serialization ids are random; the tests
read values, never bytes).
"""
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(HERE))
from pins import check_versions  # noqa: E402

PINS = check_versions(os.path.join(HERE, "requirements.txt"), "generate.py") if __name__ == "__main__" else None

import torch  # noqa: E402


def values(t):
    return [float(v) for v in t.detach().to(torch.float64).flatten().tolist()]


def main(out):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    expected = {"torch": torch.__version__, "files": {}}

    # a state dict of the dtypes a reader must widen, a non-contiguous view and a scalar
    base = torch.randn(4, 6, generator=g)
    state = {
        "f32": torch.randn(3, 5, generator=g),
        "f16": torch.randn(2, 3, generator=g).to(torch.float16),
        "bf16": torch.randn(2, 2, generator=g).to(torch.bfloat16),
        "f64": torch.randn(3, generator=g).to(torch.float64),
        "transposed": base.t(),            # shares base's storage, strides (1, 6)
        "rows": base[1:3],                 # an offset into the same storage
        "scalar": torch.tensor(2.5),
        "ids": torch.arange(5, dtype=torch.int64),
    }
    torch.save(state, os.path.join(out, "state.pt"))
    expected["files"]["state.pt"] = {
        name: {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "values": values(t)}
        for name, t in state.items()}

    # a nanoGPT-style ckpt.pt: model state dict, model_args, iter_num, best_val_loss (a tensor), config
    model = {
        "transformer.wte.weight": torch.randn(16, 8, generator=g),
        "transformer.h.0.attn.c_attn.weight": torch.randn(24, 8, generator=g),
        "transformer.h.0.attn.c_attn.bias": torch.randn(24, generator=g),
    }
    ckpt = {"model": model, "model_args": {"n_layer": 1, "n_head": 2, "n_embd": 8, "block_size": 32,
                                           "bias": True, "vocab_size": 16, "dropout": 0.0},
            "iter_num": 250, "best_val_loss": torch.tensor(1.875), "config": {"dataset": "shakespeare_char",
                                                                              "learning_rate": 0.001}}
    torch.save(ckpt, os.path.join(out, "ckpt.pt"))
    expected["files"]["ckpt.pt"] = {
        "model": {name: {"dtype": "float32", "shape": list(t.shape), "values": values(t)} for name, t in model.items()},
        "model_args": ckpt["model_args"], "iter_num": 250, "best_val_loss": 1.875}

    # malicious pickles inside a valid torch zip: each would create its marker file if executed
    for name, payload in malicious_payloads(out).items():
        path = os.path.join(out, name)
        torch.save({"x": torch.zeros(1)}, path)
        replace_pickle(path, payload)
    expected["malicious"] = sorted(malicious_payloads(out))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


class Call:
    """Pickles as a call of func(*args) (what __reduce__ makes), without running it."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def malicious_payloads(out):
    import builtins
    import subprocess
    marker = "/tmp/spanprobe-pt-marker"
    return {
        "evil_os_system.pt": pickle.dumps({"x": Call(os.system, (f"touch {marker}",))}, protocol=2),
        "evil_eval.pt": pickle.dumps(Call(builtins.eval, (f"open('{marker}', 'w')",)), protocol=2),
        "evil_popen.pt": pickle.dumps([1, {"a": (Call(subprocess.Popen, (["touch", marker],)),)}], protocol=2),
    }


def replace_pickle(path, payload):
    """Rewrites the archive with data.pkl replaced (stored, as torch writes it)."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        entries = [(i, z.read(i.filename)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for info, data in entries:
            z.writestr(info, payload if info.filename.endswith("/data.pkl") else data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fixtures/pt")
