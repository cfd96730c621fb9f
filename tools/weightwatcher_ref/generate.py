#!/usr/bin/env python3
"""Reference power-law fits of weight spectra by WeightWatcher itself, for the alpha of spanprobe's
weights analyzer (docs/metrics.md, "weights", "Power-law exponent alpha").

Writes fixtures/weightwatcher/ref.json (see README.md):
  * matrices: small seeded matrices (Gaussian, Student-t and Pareto entries, low rank plus noise, a
    rank-deficient one, a small one for weightwatcher's small-N fit): the eigenvalues of W^T W as
    weightwatcher computes them (its get_ESD) and its fit of them (alpha, xmin, D, num_pl_spikes);
  * llama-f32: weightwatcher's fit of every block matrix of the committed Hugging Face fixture
    fixtures/hf/llama-f32, which spanprobe reads directly.
Every matrix goes through WeightWatcher.analyze() with its defaults (fit='PL', pl_package='ww', xmax
None, no normalization), in weightwatcher's flat-file format (a directory of .npy files and a
ww_config.json), which needs no torch. Deterministic: fixed seeds, one BLAS thread.

Usage: generate.py [--out FILE]   (default fixtures/weightwatcher/ref.json)
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one thread, reproducible sums

import argparse
import json
import logging
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(HERE))
from pins import check_versions  # noqa: E402

PINS = check_versions(os.path.join(HERE, "requirements.txt")) if __name__ == "__main__" else None

import numpy as np  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

logging.disable(logging.CRITICAL)  # weightwatcher logs "Can not load torch" at CRITICAL; flat files need none
import weightwatcher  # noqa: E402

LLAMA = "fixtures/hf/llama-f32"
# spanprobe's matrix columns (analyzers/weights.c) and the Hugging Face tensors they come from
HF_LEAF = {"wq": "self_attn.q_proj", "wk": "self_attn.k_proj", "wv": "self_attn.v_proj", "wo": "self_attn.o_proj",
           "w1": "mlp.gate_proj", "w2": "mlp.down_proj", "w3": "mlp.up_proj"}


def low_rank_plus_noise(rng, m, n, rank, scale, noise):
    u = rng.standard_normal((m, rank))
    v = rng.standard_normal((rank, n))
    return scale * (u @ v) / np.sqrt(n) + noise * rng.standard_normal((m, n))


def pareto_signed(rng, m, n, a):
    return rng.pareto(a, (m, n)) * rng.choice([-1.0, 1.0], (m, n))


# name, seed, recipe text, builder(rng) -> float64 matrix [rows, cols]
MATRICES = [
    ("gaussian-64x256", 11, "N(0, 1) entries", lambda r: r.standard_normal((64, 256))),
    ("student3-128x128", 12, "Student-t entries, 3 degrees of freedom", lambda r: r.standard_t(3, (128, 128))),
    ("pareto-300x100", 13, "Pareto (Lomax) entries, shape 2.5, random signs", lambda r: pareto_signed(r, 300, 100, 2.5)),
    ("lowrank-200x80", 14, "rank 6 (U V / sqrt(80), scale 8, N(0, 1) factors) plus 0.3 N(0, 1) noise",
     lambda r: low_rank_plus_noise(r, 200, 80, 6, 8.0, 0.3)),
    ("student2-96x160", 15, "Student-t entries, 2 degrees of freedom, times 1e-3 (a tiny scale)",
     lambda r: 1e-3 * r.standard_t(2, (96, 160))),
    ("rankdef-40x48", 16, "rank 30: a [40, 30] N(0, 1) times a [30, 48] N(0, 1) (10 eigenvalues ~ 0, below 1e-5)",
     lambda r: r.standard_normal((40, 30)) @ r.standard_normal((30, 48))),
    ("smalln-12x16", 17, "Student-t entries, 3 degrees of freedom (12 eigenvalues: weightwatcher's small-N fit)",
     lambda r: r.standard_t(3, (12, 16))),
]


def write_flat_files(directory, named):
    """weightwatcher's flat-file model: <name>.weight.npy per matrix and ww_config.json listing them."""
    layers = {}
    for i, (name, w) in enumerate(named):
        fname = f"{name}.weight.npy"
        np.save(os.path.join(directory, fname), w)
        layers[i] = {"name": name, "longname": name, "weightfile": fname, "biasfile": None, "type": "dense",
                     "dims": json.dumps(list(w.shape))}
    with open(os.path.join(directory, "ww_config.json"), "w") as f:
        json.dump({"weights_dir": directory, "layers": layers}, f)


def watch(named, with_esd):
    """weightwatcher's analyze() (defaults) of the matrices: one dict per matrix, in order."""
    with tempfile.TemporaryDirectory() as d:
        write_flat_files(d, named)
        ww = weightwatcher.WeightWatcher(model=d)
        details = ww.analyze()
        out = []
        for i, (name, w) in enumerate(named):
            row = details[details["layer_id"] == i].iloc[0]
            fit = {"N": int(row["N"]), "M": int(row["M"]), "alpha": float(row["alpha"]), "xmin": float(row["xmin"]),
                   "D": float(row["D"]), "sigma": float(row["sigma"]), "num_pl_spikes": int(row["num_pl_spikes"]),
                   "warning": str(row["warning"])}
            if with_esd:
                evals = np.asarray(ww.get_ESD(layer=i), dtype=np.float64)
                # the same values as a plain SVD: proof that weightwatcher does not normalize them
                sv = np.linalg.svd(w.astype(np.float64), compute_uv=False)
                assert np.allclose(np.sort(sv * sv), evals, rtol=1e-12, atol=0), name
                fit["evals"] = [float(x) for x in evals]
            out.append(fit)
        return out


def synthetic():
    named, recipes = [], []
    for name, seed, recipe, build in MATRICES:
        w = build(np.random.default_rng(seed))
        named.append((name, w))
        recipes.append({"name": name, "shape": list(w.shape), "seed": seed,
                        "recipe": f"numpy.random.default_rng({seed}): {recipe}"})
    fits = watch(named, with_esd=True)
    return [dict(r, **f) for r, f in zip(recipes, fits)]


def llama():
    tensors = load_file(os.path.join(ROOT, LLAMA, "model.safetensors"))
    n_layers = 1 + max(int(k.split(".")[2]) for k in tensors if k.startswith("model.layers."))
    named, where = [], []
    for layer in range(n_layers):
        for mat, leaf in HF_LEAF.items():
            key = f"model.layers.{layer}.{leaf}.weight"
            named.append((f"l{layer}_{mat}", tensors[key]))  # float32, as stored
            where.append({"block": layer, "matrix": mat, "tensor": key})
    fits = watch(named, with_esd=False)
    return {"source": f"{LLAMA}/model.safetensors", "n_layers": n_layers,
            "matrices": [dict(w, **f) for w, f in zip(where, fits)]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "fixtures", "weightwatcher", "ref.json"))
    args = ap.parse_args()
    result = {
        "generator": "tools/weightwatcher_ref/generate.py",
        "versions": dict(PINS, python=sys.version.split()[0]),
        "call": "weightwatcher.WeightWatcher(model=<flat-file dir>).analyze() with its defaults: fit='PL', "
                "pl_package='ww', xmax=None, min_evals=8, max_evals=15000, max_N=50000; evals = get_ESD(layer)",
        "matrices": synthetic(),
        "llama-f32": llama(),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
