#!/usr/bin/env python3
"""Reference curvature numbers for `spanprobe analyze --metrics curvature` (docs/metrics.md, "curvature"),
from PyTorch's double backward (the Hessian-vector product PyHessian uses), in float64.

For each tiny Hugging Face fixture of MODELS (fixtures/hf/<name>, read by the independent float64 forward
tools/hf_fixtures/forward64.py) and seeded token windows, the mean next-token loss and, for every block l
(the tensors named by the layer's prefix, spanprobe's blocks/<l>/), with H the Hessian of the loss in
those parameters and g its gradient:
  lambda_max  the eigenvalue of largest magnitude of H, by power iteration on torch HVPs;
  g_h_g       g^T H g / g^T g;
  h_g_norm    ||H g|| / ||g||.
Each is invariant under the reparameterizations an importer makes (permuted or transposed weights,
Gemma's 1 + w norm gains), so spanprobe's own parameter layout gives the same numbers.
Deterministic: fixed seeds, one CPU thread. Usage: generate.py [--out FILE] (default fixtures/hessian/ref.json)
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(HERE))
from pins import check_versions  # noqa: E402

PINS = check_versions(os.path.join(HERE, "requirements.txt")) if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools", "hf_fixtures"))
import forward64  # noqa: E402

MODELS = ["llama-f32", "gpt2-f32", "gemma2-f32", "qwen3-f32", "olmo2-f32"]
N_SEQS, SEQ = 2, 12          # windows of SEQ + 1 token ids: inputs and their next-token targets
TOKENS_SEED = 20261127       # model k draws its windows from default_rng(TOKENS_SEED + k)
START_SEED = 5               # block l's power iteration starts from torch N(0, I) seeded START_SEED + l
POWER_TOL, POWER_MAX = 1e-13, 20000

torch.set_num_threads(1)


def block_names(model, l):
    prefix = model.prefix(l)
    return sorted(n for n in model.W if n.startswith(prefix))


def power_iteration(hvp, n, seed):
    """The eigenvalue of largest magnitude: v unit, w = H v, lambda = v.w, v = w / |w| until lambda
    changes by at most POWER_TOL relative. Returns (lambda, iterations, converged)."""
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(n, generator=gen, dtype=torch.float64)
    v /= v.norm()
    lam = float("nan")
    for it in range(1, POWER_MAX + 1):
        w = hvp(v)
        prev, lam = lam, float(v @ w)
        if abs(lam - prev) <= POWER_TOL * abs(lam):
            return lam, it, True
        v = w / w.norm()
    return lam, POWER_MAX, False


def model_reference(name, k):
    model = forward64.Model(os.path.join(ROOT, "fixtures", "hf", name), requires_grad=True)
    vocab = model.cfg["vocab_size"]
    windows = np.random.default_rng(TOKENS_SEED + k).integers(0, vocab, size=(N_SEQS, SEQ + 1))
    tokens = torch.tensor(windows, dtype=torch.int64)
    logits, _, _ = model.forward(tokens[:, :-1])
    loss = forward64.cross_entropy(logits, tokens[:, 1:])
    blocks = []
    for l in range(model.arch["n_layers"]):
        params = [model.W[n] for n in block_names(model, l)]
        grads = torch.autograd.grad(loss, params, create_graph=True)
        g = torch.cat([x.reshape(-1) for x in grads])

        def hvp(v, params=params, g=g):
            hv = torch.autograd.grad(g, params, grad_outputs=v.detach(), retain_graph=True)
            return torch.cat([x.reshape(-1) for x in hv]).detach()

        gd = g.detach()
        hg = hvp(gd)
        lam, iters, converged = power_iteration(hvp, g.numel(), START_SEED + l)
        blocks.append({"n_params": g.numel(), "lambda_max": lam if converged else None, "power_iters": iters,
                       "g_h_g": float(gd @ hg / (gd @ gd)), "h_g_norm": float(hg.norm() / gd.norm())})
        print(f"{name} block {l}: {g.numel()} parameters, lambda_max {lam:.12g} ({iters} iterations"
              f"{'' if converged else ', not converged'})", file=sys.stderr)
    return {"tokens": windows.tolist(), "loss": float(loss.detach()), "blocks": blocks}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "fixtures", "hessian", "ref.json"))
    args = parser.parse_args()
    ref = {"versions": dict(PINS, python=sys.version.split()[0]),
           "n_seqs": N_SEQS, "seq_len": SEQ, "tokens_seed": TOKENS_SEED, "start_seed": START_SEED,
           "power_tol": POWER_TOL, "models": {}}
    for k, name in enumerate(MODELS):
        ref["models"][name] = model_reference(name, k)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
