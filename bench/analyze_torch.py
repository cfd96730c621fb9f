"""The computations of `spanprobe analyze` in PyTorch eager, written the way a researcher would
(hooks, torch.linalg, torch.func jvp/vjp/jacrev), timed stage by stage next to spanprobe in
bench/run_analyze_bench.sh (CPU) and bench/run_gpu_analyze_bench.sh (--device cuda).

The model is bench/torch_model.py's `pre` or `span` model (--variant), randomly initialized
(N(0, 0.02^2) matrices, as `spanprobe init` draws them): the weights do not change the amount of
work (every iteration count is fixed), so the benchmark does not load the spanprobe checkpoint.
Tokens are random byte ids (or --tokens FILE, the same file spanprobe reads).

Stages (each timed; docs/metrics.md defines the quantities):
  forward passes  every evaluation batch forward with hooks keeping the layer outputs h_0..h_L, the
                  FFN latents (the input of W_2) and, for span, the pre-normalization sums
  similarity      mean over tokens of the cosine between every pair of layer outputs
  cka             linear CKA between every pair of layer outputs (feature-space form)
  growth          rms, mean token norm, feature variance, top |h| entries, median |h|
  presums         span only: sigma and rms of every sum before N1 and N2
  hidden_spectra  eigvalsh of every layer output's covariance
  ffn_spectra     eigvalsh of every FFN latent's covariance
  grad_norms      forward + backward on --grad-batches batches, per-tensor gradient norms
  token_uniformity per layer and sequence: mean pairwise cosine of the token vectors and the
                  relative residual ||H - 1 mean(H)^T||_F / ||H||_F
  logit_lens      every layer output through the final norm and the tied head: loss, top-1
                  accuracy, KL to the last layer's distribution, argmax agreement
  attention       per layer and head: attention entropy (and over ln of the visible keys), the
                  mass on position 0, the mean distance, the largest score, the cosine between
                  heads' attention rows (probabilities recomputed from hooked q and k)
  weights         svdvals of W_Q, W_K, W_V per head, W_O, W_1, W_2: condition numbers; svdvals of
                  W_Q, W_K, W_V whole and a power law fitted to every matrix's eigenvalues of W^T W
                  (maximum likelihood, xmin by the least KS distance, as WeightWatcher fits)
  embed_spectrum  eigvalsh of the token embedding's covariance
  jacobian        one sequence of --jac-seq tokens: sigma_max of every block and end to end by power
                  iteration, top-k by subspace iteration (k copies of the sequence carry the k
                  vectors), every one --power-iters products (jvp / vjp); ||W_2 W_1||, ||W_O W_V||;
                  token-local Jacobians at --jac-tokens positions (jacrev in chunks of --jac-chunk
                  rows, or torch.autograd.functional.jacobian on PyTorch 1.x) and their SVDs
  pruning         the loss with each block skipped, and without the last k blocks, k = 1..L/2, on
                  --prune-batches batches

Precision of the decompositions (--linalg-dtype): float64 on the CPU, float32 on the GPU, what a
researcher writes in each place (torch.linalg on CUDA tensors as they come; the issue's PyTorch
reference figures were float32 on the GPU). The products before them are float32 everywhere;
--tf32 lets CUDA matrix products use TF32 tensor cores.

--device cuda: a warm-up run of every stage first (same shapes, 2 power iterations, 1 token-local
position: CUDA context, cuBLAS/cuSOLVER handles and workspaces, allocator), then --rounds timed
rounds; every stage is timed between torch.cuda.synchronize() calls. Stage times are medians over
the rounds. Peak GPU memory: torch.cuda.max_memory_allocated over the timed rounds (tensors) and
max_memory_reserved (what the caching allocator held).
Prints one JSON object: {"impl": ..., "stages": {name: seconds}, "total_s": ..., "peak_rss_mib": ...,
"peak_gpu_mib": ..., ...}.
"""
import argparse
import copy
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_model import Model  # noqa: E402

try:
    from torch.func import jacrev, jvp, vjp  # PyTorch >= 2.0
except ImportError:  # PyTorch 1.13 (Debian's python3-torch): functorch, no chunked jacrev
    from functorch import jvp, vjp
    jacrev = None


def arg_parser():
    """The options every analysis benchmark takes (bench/analyze_hf_torch.py adds its own)."""
    ap = argparse.ArgumentParser()
    for name, default in [("d-model", 256), ("n-layers", 12), ("n-heads", 8), ("d-ff", 1024), ("vocab", 256),
                          ("seq", 256), ("batch", 8), ("n-tokens", 16384), ("threads", 2), ("grad-batches", 1),
                          ("prune-batches", 2), ("power-iters", 20), ("topk", 8), ("jac-seq", 64),
                          ("jac-tokens", 4), ("jac-chunk", 64), ("rounds", 1)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--variant", choices=["pre", "span"], default="pre")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--tf32", action="store_true", help="TF32 tensor-core matrix products (cuda)")
    ap.add_argument("--linalg-dtype", choices=["auto", "float32", "float64"], default="auto",
                    help="eigvalsh/svdvals/qr precision (auto: float64 on cpu, float32 on cuda)")
    ap.add_argument("--warmup", choices=["auto", "yes", "no"], default="auto",
                    help="a shortened run of every stage before the timed rounds (auto: on cuda only)")
    ap.add_argument("--tokens", help="whitespace-separated token ids (default: random ids)")
    return ap


def parse_args(ap=None):
    args = (ap or arg_parser()).parse_args()
    args.device = torch.device(args.device)
    if args.linalg_dtype == "auto":
        args.linalg_dtype = "float32" if args.device.type == "cuda" else "float64"
    args.ldt = getattr(torch, args.linalg_dtype)
    if args.warmup == "auto":
        args.warmup = "yes" if args.device.type == "cuda" else "no"
    return args


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def eval_set(args):
    n_seqs = -(-args.n_tokens // args.seq)
    if args.tokens:
        ids = torch.tensor([int(t) for t in open(args.tokens).read().split()], dtype=torch.long)
        windows = ids[: (len(ids) // (args.seq + 1)) * (args.seq + 1)].view(-1, args.seq + 1)[:n_seqs]
    else:
        windows = torch.randint(0, args.vocab, (n_seqs, args.seq + 1))
    windows = windows.to(args.device)
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


def embed(model, ids):
    return model.tok(ids) + model.pos(torch.arange(ids.shape[1], device=ids.device))


def loss_of(model, ids, targets, skip=()):
    x = embed(model, ids)
    for l, block in enumerate(model.blocks):
        if l not in skip:
            x = block(x)
    logits = model.final(x) @ model.tok.weight.t()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def collect(model, inputs, batch):
    """Layer outputs [L+1, N, d], FFN latents [L, N, d_ff], span's sums [2, L, N, d] (else None), and
    the attention inputs: the outputs of W_Q and W_K per batch and block."""
    hidden, latents, sums, qs, ks = [], [], [], [], []
    flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
    hooks = [b.register_forward_hook(lambda mod, inp, out: hidden.append(flat(out))) for b in model.blocks]
    hooks += [b.wq.register_forward_hook(lambda mod, inp, out: qs.append(out)) for b in model.blocks]
    hooks += [b.wk.register_forward_hook(lambda mod, inp, out: ks.append(out)) for b in model.blocks]
    hooks += [b.w2.register_forward_pre_hook(lambda mod, inp: latents.append(flat(inp[0]))) for b in model.blocks]
    if model.blocks[0].variant == "span":  # the inputs of N1 and N2 are the sums A + x and F + x
        hooks += [n.register_forward_pre_hook(lambda mod, inp: sums.append(flat(inp[0])))
                  for b in model.blocks for n in (b.n1, b.n2)]
    L = len(model.blocks)
    with torch.no_grad():
        for s in range(0, inputs.shape[0], batch):
            ids = inputs[s:s + batch]
            x = embed(model, ids)
            hidden.append(flat(x))
            for block in model.blocks:
                x = block(x)
    for h in hooks:
        h.remove()
    n_b = len(hidden) // (L + 1)
    hs = torch.stack([torch.cat([hidden[b * (L + 1) + l] for b in range(n_b)]) for l in range(L + 1)])
    lat = torch.stack([torch.cat([latents[b * L + l] for b in range(n_b)]) for l in range(L)])
    ps = None
    if sums:  # per batch: n1 of block 0, n2 of block 0, n1 of block 1, ...
        ps = torch.stack([torch.stack([torch.cat([sums[b * 2 * L + 2 * l + w] for b in range(n_b)])
                                       for l in range(L)]) for w in range(2)])
    return hs, lat, ps, (qs, ks)


def similarity(hs):
    u = F.normalize(hs, dim=-1)
    return torch.einsum("ind,jnd->ij", u, u) / hs.shape[1]


def cka(hs):
    xc = hs - hs.mean(dim=1, keepdim=True)
    n = xc.shape[0]
    hsic = torch.empty(n, n, device=hs.device)
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


def presums(ps):
    return {"sigma": ps.std(dim=-1, unbiased=False).mean(dim=-1), "rms": ps.pow(2).mean(dim=(-2, -1)).sqrt()}


def cov_eigvalsh(x, ldt):
    """Eigenvalues of the covariance of the rows of every x[l] (float32 products, eigvalsh in ldt)."""
    xc = x - x.mean(dim=1, keepdim=True)
    cov = xc.transpose(1, 2) @ xc / (x.shape[1] - 1)
    return torch.linalg.eigvalsh(cov.to(ldt))


def grad_norms(model, inputs, targets, args):
    model.zero_grad(set_to_none=True)
    for b in range(args.grad_batches):
        sl = slice(b * args.batch, (b + 1) * args.batch)
        (loss_of(model, inputs[sl], targets[sl]) / args.grad_batches).backward()
    norms = {n: p.grad.norm().item() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return norms


def powerlaw_alpha(evals):
    """alpha, xmin, KS distance of x^-alpha fitted to the tail of evals (> 1e-5): every value but the
    largest a candidate xmin, alpha by maximum likelihood, the candidate of least KS distance."""
    x = evals[evals > 1e-5].sort().values
    n = x.shape[0]
    logs = x.log()
    tail_sum = logs.flip(0).cumsum(0).flip(0)  # sum_{j >= i} ln x_j
    counts = torch.arange(n, 0, -1, dtype=x.dtype, device=x.device)
    best = (float("inf"), None, None)
    for i in range(n - 1):
        alpha = 1 + counts[i] / (tail_sum[i] - counts[i] * logs[i])
        tail = x[i:]
        cdf = 1 - (tail / x[i]).pow(1 - alpha)
        d = (cdf - torch.arange(tail.shape[0], dtype=x.dtype, device=x.device) / tail.shape[0]).abs().max().item() if alpha > 1 else 1
        if d < best[0]:
            best = (d, alpha.item(), x[i].item())
    return best[1], best[2], best[0]


def weights(model, args):
    hd = args.d_model // args.n_heads
    kappas, alphas = [], []
    with torch.no_grad():
        for block in model.blocks:
            mats = [w.weight[h * hd:(h + 1) * hd] for w in (block.wq, block.wk, block.wv) for h in range(args.n_heads)]
            mats += [block.wo.weight, block.w1.weight, block.w2.weight]
            for w in mats:
                s = torch.linalg.svdvals(w.to(args.ldt))
                kappas.append((s[0] / s[-1]).item())
            for w in (block.wq, block.wk, block.wv, block.wo, block.w1, block.w2):
                alphas.append(powerlaw_alpha(torch.linalg.svdvals(w.weight.to(args.ldt)).pow(2)))
    return kappas, alphas


def token_uniformity(hs, seq):
    """Per layer, the means over sequences of the mean pairwise cosine and the relative residual."""
    h = hs.reshape(hs.shape[0], -1, seq, hs.shape[-1])  # [L+1, sequences, T, d]
    u = F.normalize(h, dim=-1)
    gram = u @ u.transpose(-2, -1)
    cos = (gram.sum(dim=(-2, -1)) - gram.diagonal(dim1=-2, dim2=-1).sum(-1)) / (seq * (seq - 1))
    resid = (h - h.mean(dim=2, keepdim=True)).norm(dim=(-2, -1)) / h.norm(dim=(-2, -1))
    return cos.mean(dim=1), resid.mean(dim=1)


def logit_lens(model, hs, targets):
    """Per layer output: loss, top-1 accuracy, KL(p_L || p_l), argmax agreement with the last layer."""
    tgt = targets.reshape(-1)
    out = []
    with torch.no_grad():
        final = F.log_softmax(model.final(hs[-1]) @ model.tok.weight.t(), dim=-1)
        p_final, top_final = final.exp(), final.argmax(-1)
        for h in hs:
            logp = F.log_softmax(model.final(h) @ model.tok.weight.t(), dim=-1)
            top = logp.argmax(-1)
            out.append((F.nll_loss(logp, tgt).item(), (top == tgt).float().mean().item(),
                        (p_final * (final - logp)).sum(-1).mean().item(), (top == top_final).float().mean().item()))
    return out


def attention(model, qs, ks):
    """Per layer and head: entropy, normalized entropy, sink mass, distance, max score; head cosines.
    qs, ks: the outputs of W_Q and W_K of every block and batch, as collect's hooks kept them."""
    L, H = len(model.blocks), model.blocks[0].n_heads
    dev = qs[0].device
    sums = torch.zeros(L, 5, H, dtype=torch.float64, device=dev)
    sums[:, 4] = float("-inf")
    cos = torch.zeros(L, H, H, dtype=torch.float64, device=dev)
    for i, (q, k) in enumerate(zip(qs, ks)):
        l = i % L
        b, t, d = q.shape
        hd = d // H
        q, k = (z.view(b, t, H, hd).transpose(1, 2) for z in (q, k))
        scores = (q @ k.transpose(-2, -1)) / hd ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=dev).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        p = F.softmax(scores.double(), dim=-1)
        ent = -(p * p.clamp_min(1e-300).log()).sum(-1)  # [b, H, t]
        pos = torch.arange(t, dtype=torch.float64, device=dev)
        visible = pos + 1
        sums[l, 0] += ent.sum(dim=(0, 2))
        sums[l, 1] += (ent[..., 1:] / visible[1:].log()).sum(dim=(0, 2))
        sums[l, 2] += p[..., 0].sum(dim=(0, 2))
        sums[l, 3] += (p * (pos[:, None] - pos[None, :]).clamp_min(0)).sum(-1).sum(dim=(0, 2))
        sums[l, 4] = torch.maximum(sums[l, 4], scores.amax(dim=(0, 2, 3)).double())
        u = F.normalize(p[..., 1:, :], dim=-1)  # rows that see two keys or more
        cos[l] += torch.einsum("bhtj,bgtj->hg", u, u)
    return sums, cos


def top_singvals(apply, apply_t, shape, k, iters, ldt, device):
    """Subspace iteration on J^T J with k vectors stacked along dim 0 (k = 1: the power iteration)."""
    v = torch.randn(k, *shape, device=device)
    sigma = None
    for _ in range(iters):
        q, _ = torch.linalg.qr(v.reshape(k, -1).t().to(ldt))
        v = q.t().float().reshape(k, *shape)
        u = apply(v)
        gram = (u.reshape(k, -1) @ u.reshape(k, -1).t()).to(ldt)
        sigma = torch.linalg.eigvalsh(gram).flip(0).clamp(min=0).sqrt()
        v = apply_t(u)
    return sigma


def jacobian(model, inputs, args):
    """The Jacobians with respect to the hidden states alone: with the weights requiring gradients,
    every vmapped pullback also formed a batch of weight gradients (a 1024-token token-local
    Jacobian took the H100's 80 GB on 2026-11-28; 6x the memory of this at 64 tokens on the CPU)."""
    wanted = [p.requires_grad for p in model.parameters()]
    model.requires_grad_(False)
    try:
        return hidden_jacobians(model, inputs, args)
    finally:
        for p, w in zip(model.parameters(), wanted):
            p.requires_grad_(w)


def hidden_jacobians(model, inputs, args):
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
        apply = lambda v: jvp(f, (x0,), (v,))[1]  # noqa: E731
        _, pullback = vjp(f, x0)
        return apply, lambda u: pullback(u)[0]

    shape = (T, args.d_model)

    def top(first, last, k):
        return top_singvals(*operator(first, last, k), shape, k, args.power_iters, args.ldt, args.device)

    sigma = [top(l, l + 1, 1)[0].item() for l in range(L)]
    e2e = [top(l, L, 1)[0].item() for l in range(L)]
    topk = [top(l, l + 1, args.topk).tolist() for l in range(L)]
    terms = []
    with torch.no_grad():
        for block in model.blocks:
            terms.append((torch.linalg.matrix_norm((block.w2.weight @ block.w1.weight).to(args.ldt), 2).item(),
                          torch.linalg.matrix_norm((block.wo.weight @ block.wv.weight).to(args.ldt), 2).item()))
    positions = torch.randperm(T)[:args.jac_tokens].sort().values.tolist()
    token_sigma = []
    for t in positions:
        for l, block in enumerate(model.blocks):
            prefix = xs[l][:, :t + 1]

            def at_t(xt, prefix=prefix, block=block):
                return block(torch.cat([prefix[:, :-1], xt[None, None]], dim=1))[0, -1]

            if jacrev is not None:  # reverse mode, vmapped over chunks of output rows (bounded memory)
                jt = jacrev(at_t, chunk_size=args.jac_chunk)(prefix[0, -1])
            else:
                jt = torch.autograd.functional.jacobian(at_t, prefix[0, -1], vectorize=True)
            token_sigma.append(torch.linalg.svdvals(jt.to(args.ldt))[0].item())
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


def analysis(model, inputs, targets, args, collect=collect):
    """Every stage once; {stage: seconds} and the total. collect: the forward passes with hooks."""
    stages = {}

    def timed(name, fn, *a):
        sync(args.device)
        t0 = time.perf_counter()
        result = fn(*a)
        sync(args.device)
        stages[name] = time.perf_counter() - t0
        return result

    t_start = time.perf_counter()
    hs, lat, ps, qk = timed("forward passes", collect, model, inputs, args.batch)
    timed("similarity", similarity, hs)
    timed("cka", cka, hs)
    timed("growth", growth, hs)
    if ps is not None:
        timed("presums", presums, ps)
    del ps
    timed("hidden_spectra", cov_eigvalsh, hs, args.ldt)
    timed("ffn_spectra", cov_eigvalsh, lat, args.ldt)
    timed("token_uniformity", token_uniformity, hs, inputs.shape[1])
    timed("logit_lens", logit_lens, model, hs, targets)
    del hs, lat
    timed("attention", attention, model, *qk)
    del qk
    timed("grad_norms", grad_norms, model, inputs, targets, args)
    timed("weights", weights, model, args)
    timed("embed_spectrum", lambda: cov_eigvalsh(model.tok.weight.detach()[None], args.ldt))
    timed("jacobian", jacobian, model, inputs, args)
    timed("pruning", pruning, model, inputs, targets, args)
    sync(args.device)
    return stages, time.perf_counter() - t_start


def setup(args):
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.manual_seed(0)


def measure(model, args, collect=collect):
    """The warm-up (when asked) and the timed rounds of `analysis`: the result object main prints."""
    cuda = args.device.type == "cuda"
    inputs, targets = eval_set(args)
    if args.warmup == "yes":  # same shapes, fewer iterations: initialization costs stay out of the rounds
        warm = copy.copy(args)
        warm.power_iters, warm.jac_tokens = min(2, args.power_iters), 1
        analysis(model, inputs, targets, warm, collect)
    if cuda:
        torch.cuda.reset_peak_memory_stats(args.device)
    rounds = [analysis(model, inputs, targets, args, collect) for _ in range(args.rounds)]
    stages = {name: statistics.median(r[0][name] for r in rounds) for name in rounds[0][0]}
    return {"impl": "pytorch " + torch.__version__, "threads": args.threads, "device": str(args.device),
            "gpu": torch.cuda.get_device_name(args.device) if cuda else None, "variant": args.variant,
            "tf32": args.tf32, "linalg_dtype": args.linalg_dtype, "warmup": args.warmup == "yes",
            "rounds": args.rounds, "stages": stages, "total_s": statistics.median(r[1] for r in rounds),
            "round_totals_s": [r[1] for r in rounds],
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_gpu_mib": torch.cuda.max_memory_allocated(args.device) / 2**20 if cuda else None,
            "peak_gpu_reserved_mib": torch.cuda.max_memory_reserved(args.device) / 2**20 if cuda else None}


def main():
    args = parse_args()
    setup(args)
    model = Model(args.vocab, args.d_model, args.n_layers, args.n_heads, args.d_ff, args.seq,
                  variant=args.variant).to(args.device)
    print(json.dumps(measure(model, args)))


if __name__ == "__main__":
    main()
