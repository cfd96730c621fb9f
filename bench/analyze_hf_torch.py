"""The computations of `spanprobe analyze` on a Hugging Face GPT-2 directory, in transformers +
PyTorch eager, timed stage by stage next to spanprobe in bench/run_hf_analyze_bench.sh.

The stages and their code are bench/analyze_torch.py's; here the model is transformers'
GPT2LMHeadModel loaded from DIR with from_pretrained (weights as float32, the precision spanprobe
computes in) and seen through a thin adapter:
  forward passes  model.transformer(ids) with forward hooks: the input of block 0 (h_0), every
                  block's output (h_1..h_L, before the final norm ln_f) and the input of every
                  mlp.c_proj (the FFN latent)
  blocks          the GPT2Block modules themselves, called on a hidden state; their linear maps as
                  [out, in] matrices for `weights` and the Jacobian's weight products (GPT-2 stores
                  Conv1D weights [in, out], q, k, v fused in c_attn)
  loss            wte + wpe, the blocks (some skipped for pruning), ln_f, the tied head (also what
                  logit_lens decodes every h_l through)
Attention runs transformers' "eager" implementation: the default SDPA path has no forward-mode
derivative on the CPU (torch.func.jvp fails in _scaled_dot_product_flash_attention_for_cpu), so a
block called alone gets the same additive causal mask the model builds for eager attention.
Also times from_pretrained itself ("load_s"), spanprobe's counterpart being bench/bench_hf_open.c.
Prints analyze_torch.py's JSON object.
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import analyze_torch as at  # noqa: E402


class Weight:
    """A [out, in] matrix where analyze_torch.py reads `block.wq.weight`."""

    def __init__(self, weight):
        self.weight = weight


class Block(nn.Module):
    """A GPT2Block as analyze_torch.py's stages call it."""

    def __init__(self, block):
        super().__init__()
        self.block = block
        self.n_heads = block.attn.num_heads
        self.masks = {}

    def forward(self, x):
        t = x.shape[1]
        if t not in self.masks:  # as transformers' eager mask: 0 on and below the diagonal, float min above
            self.masks[t] = torch.full((t, t), torch.finfo(x.dtype).min, device=x.device).triu(1)[None, None]
        return self.block(x, attention_mask=self.masks[t])

    def linear(self, module, rows=slice(None)):
        return Weight(module.weight[:, rows].t())  # Conv1D stores [in, out]

    @property
    def wq(self):
        d = self.block.attn.embed_dim
        return self.linear(self.block.attn.c_attn, slice(0, d))

    @property
    def wk(self):
        d = self.block.attn.embed_dim
        return self.linear(self.block.attn.c_attn, slice(d, 2 * d))

    @property
    def wv(self):
        d = self.block.attn.embed_dim
        return self.linear(self.block.attn.c_attn, slice(2 * d, 3 * d))

    @property
    def wo(self):
        return self.linear(self.block.attn.c_proj)

    @property
    def w1(self):
        return self.linear(self.block.mlp.c_fc)

    @property
    def w2(self):
        return self.linear(self.block.mlp.c_proj)


class Model(nn.Module):
    """GPT2LMHeadModel with the attributes analyze_torch.py's stages use (tok, pos, blocks, final)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf
        t = hf.transformer
        self.tok, self.pos, self.final = t.wte, t.wpe, t.ln_f
        self.blocks = nn.ModuleList(Block(b) for b in t.h)


def collect(model, inputs, batch):
    """Layer outputs [L+1, N, d] and FFN latents [L, N, d_ff] from the model's own forward, and q and
    k per batch and block (the first two thirds of c_attn's output)."""
    hidden, latents, qs, ks = [], [], [], []
    flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
    t = model.hf.transformer
    d = t.config.n_embd

    def keep_qk(mod, inp, out):
        qs.append(out[..., :d])
        ks.append(out[..., d:2 * d])

    hooks = [t.h[0].register_forward_pre_hook(lambda mod, inp: hidden.append(flat(inp[0])))]
    hooks += [b.attn.c_attn.register_forward_hook(keep_qk) for b in t.h]
    hooks += [b.register_forward_hook(lambda mod, inp, out: hidden.append(flat(out))) for b in t.h]
    hooks += [b.mlp.c_proj.register_forward_pre_hook(lambda mod, inp: latents.append(flat(inp[0]))) for b in t.h]
    L = len(t.h)
    with torch.no_grad():
        for s in range(0, inputs.shape[0], batch):
            t(inputs[s:s + batch])
    for h in hooks:
        h.remove()
    n_b = len(hidden) // (L + 1)
    hs = torch.stack([torch.cat([hidden[b * (L + 1) + l] for b in range(n_b)]) for l in range(L + 1)])
    lat = torch.stack([torch.cat([latents[b * L + l] for b in range(n_b)]) for l in range(L)])
    return hs, lat, None, (qs, ks)


def main():
    ap = at.arg_parser()
    ap.add_argument("--model", required=True, help="a Hugging Face GPT-2 directory (config.json, model.safetensors)")
    args = at.parse_args(ap)
    at.setup(args)
    t0 = time.perf_counter()
    hf = transformers.GPT2LMHeadModel.from_pretrained(args.model, dtype=torch.float32, attn_implementation="eager")
    load_s = time.perf_counter() - t0
    hf.eval().to(args.device)
    c = hf.config
    if args.seq > c.n_positions:
        sys.exit(f"analyze_hf_torch.py: --seq {args.seq} is above n_positions {c.n_positions}")
    args.d_model, args.n_layers, args.n_heads, args.vocab = c.n_embd, c.n_layer, c.n_head, c.vocab_size
    result = at.measure(Model(hf), args, collect)
    result.update(model=args.model, load_s=load_s, variant="gpt2",
                  impl=f"{result['impl']} + transformers {transformers.__version__}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
