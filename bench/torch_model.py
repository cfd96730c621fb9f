"""The spanprobe `pre` and `span` models in PyTorch, for benchmarks measured in the same run as spanprobe.

Same architecture as spanprobe's: token + learned position embedding, L blocks, bias-free linear
layers, LayerNorm with bias (eps 1e-5), GELU (tanh approximation), causal attention, head tied to
the token embedding.
  pre:  u = x + A(LN1(x)); x' = u + F(LN2(u)), then a final LayerNorm.
  span: u = LN1(A(x) + x); x' = LN2(F(u) + x) (block 0's attention reads LN0(x)), no final norm.
--device cuda runs on the GPU; --tf32 lets matrix products use TF32 tensor cores (spanprobe's
SPANPROBE_TF32=1), without it they stay full fp32 as spanprobe's default.
Prints one JSON line: {"impl": "pytorch", "tokens_per_s": ..., ...}.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, variant, first):
        super().__init__()
        self.n_heads = n_heads
        self.variant = variant
        self.n0 = nn.LayerNorm(d_model, eps=1e-5) if variant == "span" and first else None
        self.n1 = nn.LayerNorm(d_model, eps=1e-5)
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)
        self.n2 = nn.LayerNorm(d_model, eps=1e-5)
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def attention(self, x):
        b, t, d = x.shape
        hd = d // self.n_heads
        q = self.wq(x).view(b, t, self.n_heads, hd).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_heads, hd).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_heads, hd).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        a = F.softmax(scores, dim=-1) @ v
        return self.wo(a.transpose(1, 2).reshape(b, t, d))

    def ffn(self, x):
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))

    def forward(self, x):
        if self.variant == "span":
            u = self.n1(self.attention(self.n0(x) if self.n0 is not None else x) + x)
            return self.n2(self.ffn(u) + x)
        u = x + self.attention(self.n1(x))
        return u + self.ffn(self.n2(u))


class Model(nn.Module):
    def __init__(self, vocab, d_model, n_layers, n_heads, d_ff, seq_len, variant):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff, variant, l == 0) for l in range(n_layers))
        self.final = nn.LayerNorm(d_model, eps=1e-5) if variant == "pre" else nn.Identity()
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids, targets):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for block in self.blocks:
            x = block(x)
        logits = self.final(x) @ self.tok.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--n-layers", type=int, default=8)
    ap.add_argument("--n-heads", type=int, default=8)
    ap.add_argument("--d-ff", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train", action="store_true", help="also take an AdamW step")
    ap.add_argument("--variant", choices=["pre", "span"], default="pre")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--tf32", action="store_true", help="TF32 tensor-core matrix products (cuda)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = Model(args.vocab, args.d_model, args.n_layers, args.n_heads, args.d_ff, args.seq, args.variant).to(device)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95))
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)

    def step():
        model.zero_grad(set_to_none=True)
        loss = model(ids, targets)
        loss.backward()
        if args.train:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        return loss.item()  # waits for the GPU too

    step()  # warm-up
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(json.dumps({"impl": "pytorch " + torch.__version__, "threads": args.threads, "device": args.device,
                      "variant": args.variant, "tf32": args.tf32, "mode": "train" if args.train else "fwd+bwd",
                      "n_params": sum(p.numel() for p in model.parameters()),
                      "tokens_per_s": args.batch * args.seq / best,
                      "median_s": sorted(times)[len(times) // 2], "best_s": best}))


if __name__ == "__main__":
    main()
