"""The computations of `spanprobe analyze` in PyTorch CPU, written the way a researcher would (eager,
hooks, torch.linalg, functorch jvp/vjp), timed stage by stage next to spanprobe in
bench/run_analyze_bench.sh.

The model is bench/torch_model.py's `pre` model, randomly initialized (N(0, 0.02^2) matrices, as
`spanprobe init` draws them): the weights do not change the amount of work, so the benchmark does
not load the spanprobe checkpoint. Tokens are random byte ids (or --tokens FILE, the same file
spanprobe reads).

Stages (each timed; docs/metrics.md defines the quantities):
  forward passes  every evaluation batch forward with hooks keeping the layer outputs h_0..h_L and
                  the FFN latents (the input of W_2)
  similarity      mean over tokens of the cosine between every pair of layer outputs
  cka             linear CKA between every pair of layer outputs (feature-space form)
  growth          rms, mean token norm, feature variance, top |h| entries, median |h|
  hidden_spectra  eigvalsh of every layer output's covariance (float64)
  ffn_spectra     eigvalsh of every FFN latent's covariance (float64)
  grad_norms      forward + backward on --grad-batches batches, per-tensor gradient norms
  weights         svdvals of W_Q, W_K, W_V per head, W_O, W_1, W_2 (float64): condition numbers
  embed_spectrum  eigvalsh of the token embedding's covariance (float64)
  jacobian        one sequence of --jac-seq tokens: sigma_max of every block and end to end by power
                  iteration, top-k by subspace iteration (k copies of the sequence carry the k
                  vectors), every one --power-iters products (functorch.jvp / functorch.vjp);
                  ||W_2 W_1||, ||W_O W_V||; token-local Jacobians at --jac-tokens positions
                  (torch.autograd.functional.jacobian, vectorized) and their SVDs
  pruning         the loss with each block skipped, and without the last k blocks, k = 1..L/2, on
                  --prune-batches batches
Prints one JSON object: {"impl": ..., "stages": {name: seconds}, "total_s": ..., "peak_rss_mib": ...}.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_model import Model  # noqa: E402

try:
    from functorch import jvp, vjp  # torch.func in PyTorch >= 2.0
except ImportError:
    from torch.func import jvp, vjp


def parse_args():
    ap = argparse.ArgumentParser()
    for name, default in [("d-model", 256), ("n-layers", 12), ("n-heads", 8), ("d-ff", 1024), ("vocab", 256),
                          ("seq", 256), ("batch", 8), ("n-tokens", 16384), ("threads", 2), ("grad-batches", 1),
                          ("prune-batches", 2), ("power-iters", 20), ("topk", 8), ("jac-seq", 64),
                          ("jac-tokens", 4)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--tokens", help="whitespace-separated token ids (default: random ids)")
    return ap.parse_args()


def eval_set(args):
    n_seqs = -(-args.n_tokens // args.seq)
    if args.tokens:
        ids = torch.tensor([int(t) for t in open(args.tokens).read().split()], dtype=torch.long)
        windows = ids[: (len(ids) // (args.seq + 1)) * (args.seq + 1)].view(-1, args.seq + 1)[:n_seqs]
    else:
        windows = torch.randint(0, args.vocab, (n_seqs, args.seq + 1))
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


def embed(model, ids):
    return model.tok(ids) + model.pos(torch.arange(ids.shape[1]))


def loss_of(model, ids, targets, skip=()):
    x = embed(model, ids)
    for l, block in enumerate(model.blocks):
        if l not in skip:
            x = block(x)
    logits = model.final(x) @ model.tok.weight.t()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def collect(model, inputs, batch):
    """Layer outputs [L+1, N, d] and FFN latents [L, N, d_ff] of the whole evaluation set."""
    hidden, latents = [], []
    hooks = [b.register_forward_hook(lambda mod, inp, out: hidden.append(out.reshape(-1, out.shape[-1])))
             for b in model.blocks]
    hooks += [b.w2.register_forward_pre_hook(lambda mod, inp: latents.append(inp[0].reshape(-1, inp[0].shape[-1])))
              for b in model.blocks]
    L = len(model.blocks)
    with torch.no_grad():
        for s in range(0, inputs.shape[0], batch):
            ids = inputs[s:s + batch]
            x = embed(model, ids)
            hidden.append(x.reshape(-1, x.shape[-1]))
            for block in model.blocks:
                x = block(x)
    for h in hooks:
        h.remove()
    n_b = len(hidden) // (L + 1)
    hs = torch.stack([torch.cat([hidden[b * (L + 1) + l] for b in range(n_b)]) for l in range(L + 1)])
    lat = torch.stack([torch.cat([latents[b * L + l] for b in range(n_b)]) for l in range(L)])
    return hs, lat


def similarity(hs):
    u = F.normalize(hs, dim=-1)
    return torch.einsum("ind,jnd->ij", u, u) / hs.shape[1]


def cka(hs):
    xc = hs - hs.mean(dim=1, keepdim=True)
    n = xc.shape[0]
    hsic = torch.empty(n, n)
    for i in range(n):
        for j in range(i, n):
            hsic[i, j] = hsic[j, i] = (xc[i].t() @ xc[j]).pow(2).sum()
    diag = hsic.diagonal().sqrt()
    return hsic / (diag[:, None] * diag[None, :])


def growth(hs):
    out = {"rms": hs.pow(2).mean(dim=(1, 2)).sqrt(), "token_norm": hs.norm(dim=-1).mean(dim=1),
           "feature_var": hs.var(dim=-1, unbiased=False).mean(dim=1)}
    a = hs.abs().reshape(hs.shape[0], -1)
    out["top3"] = a.topk(3, dim=1).values
    out["median"] = a.median(dim=1).values
    return out


def cov_eigvalsh(x):
    """Eigenvalues of the covariance of the rows of every x[l] (float32 products, float64 eigvalsh)."""
    xc = x - x.mean(dim=1, keepdim=True)
    cov = xc.transpose(1, 2) @ xc / (x.shape[1] - 1)
    return torch.linalg.eigvalsh(cov.double())


def grad_norms(model, inputs, targets, args):
    model.zero_grad(set_to_none=True)
    for b in range(args.grad_batches):
        sl = slice(b * args.batch, (b + 1) * args.batch)
        (loss_of(model, inputs[sl], targets[sl]) / args.grad_batches).backward()
    norms = {n: p.grad.norm().item() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return norms


def weights(model, args):
    hd = args.d_model // args.n_heads
    kappas = []
    with torch.no_grad():
        for block in model.blocks:
            mats = [w.weight[h * hd:(h + 1) * hd] for w in (block.wq, block.wk, block.wv) for h in range(args.n_heads)]
            mats += [block.wo.weight, block.w1.weight, block.w2.weight]
            for w in mats:
                s = torch.linalg.svdvals(w.double())
                kappas.append((s[0] / s[-1]).item())
    return kappas


def top_singvals(apply, apply_t, shape, k, iters):
    """Subspace iteration on J^T J with k vectors stacked along dim 0 (k = 1: the power iteration)."""
    v = torch.randn(k, *shape)
    sigma = None
    for _ in range(iters):
        q, _ = torch.linalg.qr(v.reshape(k, -1).t().double())
        v = q.t().float().reshape(k, *shape)
        u = apply(v)
        sigma = torch.linalg.eigvalsh((u.reshape(k, -1) @ u.reshape(k, -1).t()).double()).flip(0).clamp(min=0).sqrt()
        v = apply_t(u)
    return sigma


def jacobian(model, inputs, args):
    T = args.jac_seq
    ids = inputs[:1, :T]
    with torch.no_grad():
        xs = [embed(model, ids)]
        for block in model.blocks:
            xs.append(block(xs[-1]))
    L = len(model.blocks)

    def chain(first, last):
        def f(x):
            for block in model.blocks[first:last]:
                x = block(x)
            return x
        return f

    def operator(first, last, k):
        f = chain(first, last)
        x0 = xs[first].expand(k, -1, -1).contiguous()
        apply = lambda v: jvp(f, (x0,), (v,))[1]
        _, pullback = vjp(f, x0)
        return apply, lambda u: pullback(u)[0]

    shape = (T, args.d_model)
    sigma = [top_singvals(*operator(l, l + 1, 1), shape, 1, args.power_iters)[0].item() for l in range(L)]
    e2e = [top_singvals(*operator(l, L, 1), shape, 1, args.power_iters)[0].item() for l in range(L)]
    topk = [top_singvals(*operator(l, l + 1, args.topk), shape, args.topk, args.power_iters).tolist() for l in range(L)]
    terms = []
    with torch.no_grad():
        for block in model.blocks:
            terms.append((torch.linalg.matrix_norm((block.w2.weight @ block.w1.weight).double(), 2).item(),
                          torch.linalg.matrix_norm((block.wo.weight @ block.wv.weight).double(), 2).item()))
    positions = torch.randperm(T)[:args.jac_tokens].sort().values.tolist()
    token_sigma = []
    for t in positions:
        for l, block in enumerate(model.blocks):
            prefix = xs[l][:, :t + 1]

            def at_t(xt, prefix=prefix, block=block):
                return block(torch.cat([prefix[:, :-1], xt[None, None]], dim=1))[0, -1]

            jt = torch.autograd.functional.jacobian(at_t, prefix[0, -1], vectorize=True)
            token_sigma.append(torch.linalg.svdvals(jt.double())[0].item())
    return sigma, e2e, topk, terms, token_sigma


def pruning(model, inputs, targets, args):
    L = len(model.blocks)
    n = args.prune_batches * args.batch
    losses = []
    with torch.no_grad():
        for skip in [()] + [(l,) for l in range(L)] + [tuple(range(L - k, L)) for k in range(1, L // 2 + 1)]:
            losses.append(sum(loss_of(model, inputs[s:s + args.batch], targets[s:s + args.batch], skip).item()
                              for s in range(0, n, args.batch)) / args.prune_batches)
    return losses


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Model(args.vocab, args.d_model, args.n_layers, args.n_heads, args.d_ff, args.seq, variant="pre")
    inputs, targets = eval_set(args)
    stages = {}

    def timed(name, fn, *a):
        t0 = time.perf_counter()
        result = fn(*a)
        stages[name] = time.perf_counter() - t0
        return result

    t_start = time.perf_counter()
    hs, lat = timed("forward passes", collect, model, inputs, args.batch)
    timed("similarity", similarity, hs)
    timed("cka", cka, hs)
    timed("growth", growth, hs)
    timed("hidden_spectra", cov_eigvalsh, hs)
    timed("ffn_spectra", cov_eigvalsh, lat)
    del lat
    timed("grad_norms", grad_norms, model, inputs, targets, args)
    timed("weights", weights, model, args)
    timed("embed_spectrum", lambda: cov_eigvalsh(model.tok.weight.detach()[None]))
    timed("jacobian", jacobian, model, inputs, args)
    timed("pruning", pruning, model, inputs, targets, args)
    total = time.perf_counter() - t_start
    print(json.dumps({"impl": "pytorch " + torch.__version__, "threads": args.threads, "stages": stages,
                      "total_s": total, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
