"""Independent float64 forward pass of the Hugging Face decoder architectures spanprobe imports.

This is the reference the C importer's float64 build is checked against, so it is written as plain
math on float64 torch tensors, without any transformers module: the weights are read from the saved
safetensors files (sharded or not, any stored dtype, widened to float64 exactly) and the
architecture from config.json, in either the transformers 5 key names (`rope_parameters`, `dtype`)
or the older ones most published checkpoints carry (`rope_theta`, `rope_scaling`, `torch_dtype`,
`rotary_pct`/`rotary_emb_base`, `rope_local_base_freq`, `sliding_window_pattern`). Everything,
rotary angles and inverse frequencies included, is computed in float64 from the config values;
transformers itself computes the inverse frequencies and angles in float32 and (in RMSNorm,
softmax, RoPE) casts to float32 even when the module is float64, which is why `model.double()` is
not a float64 forward.

Conventions, mirroring transformers 5.23 (modeling_*.py, masking_utils.py, modeling_rope_utils.py):

* causal mask: query position i sees key position j iff j <= i; with a sliding window W
  additionally iff i - j < W (masking_utils.sliding_window_overlay: kv_idx > q_idx - W), i.e. the
  query and the W - 1 keys before it.
* RoPE is "rotate_half" (NeoX style, not interleaved): for the first `rot` dims of each head
  (rot = int(head_dim * partial_rotary_factor)), with half = rot / 2 and f_i the inverse
  frequencies (i < half), angle a = p * f_i at position p, and the pairs are (i, i + half):
      out[i]        = x[i] cos a - x[i + half] sin a
      out[i + half] = x[i + half] cos a + x[i] sin a
  the remaining head_dim - rot dims pass through unchanged.
* GQA: query head h reads key/value head h // (n_heads / n_kv_heads).

`forward(model, tokens)` returns the logits, the residual stream after the embedding and after each
block (before the final norm), and attention diagnostics; gradients come from torch autograd on the
float64 weight tensors (leaf tensors keyed by their safetensors names).
"""

import json
import math
import os

import torch
from safetensors import safe_open

F64 = torch.float64

SUPPORTED = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2", "qwen3", "olmo2", "gemma", "gemma2", "gemma3_text")


# ----------------------------------------------------------------------------------------------
# loading


def weight_files(model_dir):
    """The safetensors files of a saved model: the shards named by model.safetensors.index.json
    (in sorted order) when that index exists, else model.safetensors."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        return [os.path.join(model_dir, name) for name in sorted(set(weight_map.values()))]
    return [os.path.join(model_dir, "model.safetensors")]


def load_tensors(model_dir):
    """Every stored tensor, widened exactly to float64, keyed by its stored name."""
    tensors = {}
    for path in weight_files(model_dir):
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                if name in tensors:
                    raise ValueError(f"{name} stored twice")
                tensors[name] = f.get_tensor(name).to(F64)
    return tensors


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


# ----------------------------------------------------------------------------------------------
# config -> architecture description (what an importer has to read out of config.json)


def _rope_entry(params, theta_default, partial_default=None):
    """One RoPE parameter set in a uniform form; `params` is a transformers 5 `rope_parameters`
    entry or a legacy `rope_scaling` dict merged with the legacy flat keys."""
    params = dict(params or {})
    rope_type = params.get("rope_type", params.get("type", "default"))
    entry = {
        "rope_type": rope_type,
        "rope_theta": float(params.get("rope_theta", theta_default)),
        "partial_rotary_factor": float(params.get("partial_rotary_factor", partial_default if partial_default is not None else 1.0)),
    }
    if rope_type == "linear":
        entry["factor"] = float(params["factor"])
    elif rope_type == "llama3":
        for key in ("factor", "low_freq_factor", "high_freq_factor"):
            entry[key] = float(params[key])
        entry["original_max_position_embeddings"] = params["original_max_position_embeddings"]
    elif rope_type != "default":
        raise NotImplementedError(f"rope_type {rope_type}")
    return entry


def _flat_rope(cfg, theta_default=10000.0, partial_default=None):
    """RoPE parameters of a model with one set for all layers, from new or legacy keys."""
    params = cfg.get("rope_parameters")
    if not params:
        params = dict(cfg.get("rope_scaling") or {})
        if "rope_theta" in cfg:
            params.setdefault("rope_theta", cfg["rope_theta"])
        if "partial_rotary_factor" in cfg:
            params.setdefault("partial_rotary_factor", cfg["partial_rotary_factor"])
    params = dict(params)
    if params.get("rope_type", params.get("type", "default")) == "llama3":
        params.setdefault("original_max_position_embeddings", cfg.get("max_position_embeddings"))
    return _rope_entry(params, theta_default, partial_default)


def describe(cfg):
    """Architecture description from a config.json dict (both key generations)."""
    mt = cfg["model_type"]
    if mt not in SUPPORTED:
        raise NotImplementedError(mt)
    a = {"model_type": mt}
    if mt == "gpt2":
        d, H = cfg["n_embd"], cfg["n_head"]
        a.update(d=d, n_layers=cfg["n_layer"], n_heads=H, n_kv_heads=H, head_dim=d // H,
                 d_ff=cfg.get("n_inner") or 4 * d, vocab=cfg["vocab_size"],
                 norm="layernorm", eps=cfg.get("layer_norm_epsilon", 1e-5),
                 act=cfg.get("activation_function", "gelu_new"), mlp="plain", block="pre",
                 positions="learned", tied=cfg.get("tie_word_embeddings", True),
                 attn_scale=(d // H) ** -0.5 if cfg.get("scale_attn_weights", True) else 1.0,
                 scale_by_inverse_layer_idx=cfg.get("scale_attn_by_inverse_layer_idx", False))
        a["layer_types"] = ["full_attention"] * a["n_layers"]
        return a
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    a.update(d=d, n_layers=cfg["num_hidden_layers"], n_heads=H, vocab=cfg["vocab_size"], d_ff=cfg["intermediate_size"])
    if mt == "gpt_neox":
        params = cfg.get("rope_parameters") or dict(cfg.get("rope_scaling") or {})
        params = dict(params)
        # transformers' GPTNeoXConfig: rotary_emb_base (default 10000) and rotary_pct (default 0.25)
        params.setdefault("rope_theta", cfg.get("rotary_emb_base", 10000.0))
        params.setdefault("partial_rotary_factor", cfg.get("rotary_pct", 0.25))
        a.update(n_kv_heads=H, head_dim=d // H, norm="layernorm", eps=cfg.get("layer_norm_eps", 1e-5),
                 act=cfg.get("hidden_act", "gelu"), mlp="plain", positions="rope",
                 block="parallel" if cfg.get("use_parallel_residual", True) else "pre",
                 tied=cfg.get("tie_word_embeddings", False), attn_scale=(d // H) ** -0.5,
                 attention_bias=cfg.get("attention_bias", True))
        a["rope"] = {"full_attention": _rope_entry(params, 10000.0)}
        a["layer_types"] = ["full_attention"] * a["n_layers"]
        return a

    # llama-like families
    n_kv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    a.update(n_kv_heads=n_kv, head_dim=hd, eps=cfg.get("rms_norm_eps", 1e-6), mlp="gated", positions="rope",
             attn_scale=hd ** -0.5, block="pre", norm="rmsnorm")
    gemma_family = mt in ("gemma", "gemma2", "gemma3_text")
    if gemma_family:
        a["norm"] = "rmsnorm_1p"  # x / rms * (1 + w)
        a["embed_scale"] = math.sqrt(d)
        a["tied"] = cfg.get("tie_word_embeddings", True)
    else:
        a["tied"] = cfg.get("tie_word_embeddings", False)
    if mt == "gemma":
        act = cfg.get("hidden_act") or "gelu_pytorch_tanh"
        a["act"] = "gelu_pytorch_tanh" if act == "gelu" else act  # GemmaConfig remaps legacy "gelu"
    elif gemma_family:
        a["act"] = cfg.get("hidden_activation") or "gelu_pytorch_tanh"
    else:
        a["act"] = cfg.get("hidden_act", "silu")

    # projection biases
    if mt == "llama":
        a["qkv_bias"] = a["o_bias"] = cfg.get("attention_bias", False)
        a["mlp_bias"] = cfg.get("mlp_bias", False)
    elif mt == "qwen2":
        a["qkv_bias"], a["o_bias"] = True, False
    elif mt in ("qwen3", "olmo2", "gemma", "gemma2", "gemma3_text"):
        a["qkv_bias"] = a["o_bias"] = cfg.get("attention_bias", False)
    else:
        a["qkv_bias"] = a["o_bias"] = False
    a.setdefault("mlp_bias", False)

    # q/k norms and block layout
    if mt in ("qwen3", "gemma3_text"):
        a["qk_norm"] = "per_head"
    elif mt == "olmo2":
        a["qk_norm"] = "full"
        a["block"] = "olmo2"
    if mt in ("gemma2", "gemma3_text"):
        a["block"] = "sandwich"
        a["attn_scale"] = float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5
        a["final_logit_softcap"] = cfg.get("final_logit_softcapping")
        if mt == "gemma2":
            # transformers 5.23 passes attn_logit_softcapping to the attention for Gemma 2 only;
            # Gemma 3's attention ignores it.
            a["attn_logit_softcap"] = cfg.get("attn_logit_softcapping")

    # attention layer types and sliding window
    L = a["n_layers"]
    window = cfg.get("sliding_window")
    if mt == "mistral":
        a["layer_types"] = ["sliding_attention" if window is not None else "full_attention"] * L
    elif mt in ("qwen2", "qwen3"):
        if not cfg.get("use_sliding_window", False):
            window = None
        lt = cfg.get("layer_types")
        if lt is None:
            mwl = cfg.get("max_window_layers", 28)
            lt = ["sliding_attention" if window is not None and i >= mwl else "full_attention" for i in range(L)]
        a["layer_types"] = list(lt)
    elif mt == "gemma2":
        a["layer_types"] = list(cfg.get("layer_types") or
                                ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)])
    elif mt == "gemma3_text":
        pattern = cfg.get("sliding_window_pattern", 6)
        a["layer_types"] = list(cfg.get("layer_types") or
                                ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(L)])
    else:
        a["layer_types"] = ["full_attention"] * L
    a["sliding_window"] = window if "sliding_attention" in a["layer_types"] else None

    # RoPE
    if mt == "gemma3_text":
        params = cfg.get("rope_parameters")
        if params and ("full_attention" in params or "sliding_attention" in params):
            full = dict(params.get("full_attention") or {})
            slid = dict(params.get("sliding_attention") or {})
        else:  # legacy: rope_theta + rope_scaling for global layers, rope_local_base_freq for local
            full = dict(cfg.get("rope_scaling") or {})
            if "rope_theta" in cfg:
                full.setdefault("rope_theta", cfg["rope_theta"])
            slid = {"rope_type": "default"}
            if "rope_local_base_freq" in cfg:
                slid["rope_theta"] = cfg["rope_local_base_freq"]
        a["rope"] = {"full_attention": _rope_entry(full, 1_000_000.0),
                     "sliding_attention": _rope_entry(slid, 10_000.0)}
    else:
        entry = _flat_rope(cfg)
        if entry["partial_rotary_factor"] != 1.0:
            raise NotImplementedError("partial rotary outside GPT-NeoX")  # llama-like default RoPE ignores it
        a["rope"] = {"full_attention": entry, "sliding_attention": entry}
    return a


# ----------------------------------------------------------------------------------------------
# RoPE


def inv_freq64(entry, head_dim):
    """Inverse frequencies in float64, as transformers' ROPE_INIT_FUNCTIONS compute them in float32."""
    dim = int(head_dim * entry["partial_rotary_factor"])
    base = entry["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=F64) / dim))
    t = entry["rope_type"]
    if t == "linear":
        inv = inv / entry["factor"]
    elif t == "llama3":
        factor, low, high = entry["factor"], entry["low_freq_factor"], entry["high_freq_factor"]
        old = entry["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv = torch.where(medium, smoothed, scaled)
    return inv, dim


def llama3_regimes(entry, head_dim):
    """How many llama3 frequencies are kept, smoothed and divided by the factor."""
    base_entry = dict(entry, rope_type="default")
    inv, _ = inv_freq64(base_entry, head_dim)
    wavelen = 2 * math.pi / inv
    old = entry["original_max_position_embeddings"]
    high, low = old / entry["high_freq_factor"], old / entry["low_freq_factor"]
    return {"kept": int((wavelen < high).sum()), "smoothed": int(((wavelen >= high) & (wavelen <= low)).sum()),
            "divided": int((wavelen > low).sum())}


def apply_rope(x, inv, rot, interleaved=False):
    """x: [B, T, heads, hd]; rotate_half over the first `rot` dims of each head. `interleaved`
    (pairs (2i, 2i+1), the original Meta layout) is wrong for every HF checkpoint and only serves
    the generator's sensitivity check."""
    T = x.shape[1]
    pos = torch.arange(T, dtype=F64)
    ang = pos[:, None] * inv[None, :]  # [T, rot/2]
    if interleaved:
        cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
        xr, xp = x[..., :rot], x[..., rot:]
        x0, x1 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1).flatten(-2)
        return torch.cat((y, xp), dim=-1)
    emb = torch.cat((ang, ang), dim=-1)  # [T, rot]
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    xr, xp = x[..., :rot], x[..., rot:]
    half = rot // 2
    rotated = torch.cat((-xr[..., half:], xr[..., :half]), dim=-1)
    return torch.cat((xr * cos + rotated * sin, xp), dim=-1)


# ----------------------------------------------------------------------------------------------
# building blocks


def act_fn(name, x):
    if name == "silu":
        return x * torch.sigmoid(x)
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    raise NotImplementedError(name)


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdim=True)
    return xc / torch.sqrt(var + eps) * w + b


def rmsnorm(x, w, eps, one_plus):
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return y * (1.0 + w) if one_plus else y * w


def linear(x, w, b=None):
    """nn.Linear: w is [out, in]."""
    y = x @ w.T
    return y if b is None else y + b


def conv1d(x, w, b):
    """GPT-2's Conv1D: w is [in, out]."""
    return x @ w + b


class Model:
    """A float64 model: architecture description + float64 weight tensors (leaves for autograd)."""

    def __init__(self, model_dir, requires_grad=False):
        self.cfg = load_config(model_dir)
        self.arch = describe(self.cfg)
        self.W = load_tensors(model_dir)
        if requires_grad:
            for t in self.W.values():
                t.requires_grad_(True)
        self.used = set()
        self.require_all_used = True  # every stored tensor must take part in the forward

    def w(self, name, optional=False):
        if name not in self.W:
            if optional:
                return None
            raise KeyError(f"{name} missing from the checkpoint")
        self.used.add(name)
        return self.W[name]

    # -- names ------------------------------------------------------------------------------
    def prefix(self, l):
        mt = self.arch["model_type"]
        if mt == "gpt2":
            return f"transformer.h.{l}."
        if mt == "gpt_neox":
            return f"gpt_neox.layers.{l}."
        return f"model.layers.{l}."

    def norm(self, x, name):
        a = self.arch
        if a["norm"] == "layernorm":
            return layernorm(x, self.w(name + ".weight"), self.w(name + ".bias"), a["eps"])
        return rmsnorm(x, self.w(name + ".weight"), a["eps"], a["norm"] == "rmsnorm_1p")

    # -- attention ------------------------------------------------------------------------------
    def qkv(self, l, x):
        a, p = self.arch, self.prefix(l)
        B, T, _ = x.shape
        H, KV, hd = a["n_heads"], a["n_kv_heads"], a["head_dim"]
        mt = a["model_type"]
        if mt == "gpt2":
            y = conv1d(x, self.w(p + "attn.c_attn.weight"), self.w(p + "attn.c_attn.bias"))  # [B,T,3d]
            d = a["d"]
            q, k, v = y[..., :d], y[..., d:2 * d], y[..., 2 * d:]
            return q.reshape(B, T, H, hd), k.reshape(B, T, H, hd), v.reshape(B, T, H, hd)
        if mt == "gpt_neox":
            bias = self.w(p + "attention.query_key_value.bias") if a["attention_bias"] else None
            y = linear(x, self.w(p + "attention.query_key_value.weight"), bias)  # [B,T,3d]
            y = y.reshape(B, T, H, 3 * hd)  # per head [q | k | v]
            return y[..., :hd], y[..., hd:2 * hd], y[..., 2 * hd:]
        sa = p + "self_attn."
        qb = a["qkv_bias"]
        q = linear(x, self.w(sa + "q_proj.weight"), self.w(sa + "q_proj.bias") if qb else None)
        k = linear(x, self.w(sa + "k_proj.weight"), self.w(sa + "k_proj.bias") if qb else None)
        v = linear(x, self.w(sa + "v_proj.weight"), self.w(sa + "v_proj.bias") if qb else None)
        if a.get("qk_norm") == "full":  # OLMo 2: over all heads of the projection
            q = rmsnorm(q, self.w(sa + "q_norm.weight"), a["eps"], False)
            k = rmsnorm(k, self.w(sa + "k_norm.weight"), a["eps"], False)
        q, k, v = q.reshape(B, T, H, hd), k.reshape(B, T, KV, hd), v.reshape(B, T, KV, hd)
        if a.get("qk_norm") == "per_head":  # Qwen 3, Gemma 3: over head_dim, one weight shared by heads
            one_plus = a["norm"] == "rmsnorm_1p"
            q = rmsnorm(q, self.w(sa + "q_norm.weight"), a["eps"], one_plus)
            k = rmsnorm(k, self.w(sa + "k_norm.weight"), a["eps"], one_plus)
        return q, k, v

    def attention(self, l, x, diag):
        a, p = self.arch, self.prefix(l)
        B, T, _ = x.shape
        H, KV, hd = a["n_heads"], a["n_kv_heads"], a["head_dim"]
        q, k, v = self.qkv(l, x)
        lt = a["layer_types"][l]
        if a["positions"] == "rope":
            inv, rot = inv_freq64(a["rope"][lt], hd)
            il = a.get("interleaved_rope", False)
            q, k = apply_rope(q, inv, rot, il), apply_rope(k, inv, rot, il)
        rep = H // KV
        if a.get("kv_tiled"):  # wrong on purpose (sensitivity check only): head h -> kv head h % KV
            k, v = k.repeat(1, 1, rep, 1), v.repeat(1, 1, rep, 1)
        else:
            k = k.repeat_interleave(rep, dim=2)  # head h uses kv head h // rep
            v = v.repeat_interleave(rep, dim=2)
        scale = a["attn_scale"]
        if a.get("scale_by_inverse_layer_idx"):
            scale = scale / float(l + 1)
        s = torch.einsum("bihd,bjhd->bhij", q, k) * scale
        cap = a.get("attn_logit_softcap")
        if cap is not None:
            raw = s
            s = cap * torch.tanh(s / cap)
            diag.setdefault("attn_softcap", []).append(_softcap_diag(raw.detach(), s.detach(), cap, T))
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        allowed = j <= i
        if lt == "sliding_attention":
            allowed = allowed & (i - j < a["sliding_window"])
        s = s.masked_fill(~allowed, float("-inf"))
        P = torch.softmax(s, dim=-1)
        diag.setdefault("attn_entropy_ratio", []).append(_entropy_diag(P.detach(), allowed))
        o = torch.einsum("bhij,bjhd->bihd", P, v).reshape(B, T, H * hd)
        mt = a["model_type"]
        if mt == "gpt2":
            return conv1d(o, self.w(p + "attn.c_proj.weight"), self.w(p + "attn.c_proj.bias"))
        if mt == "gpt_neox":
            bias = self.w(p + "attention.dense.bias") if a["attention_bias"] else None
            return linear(o, self.w(p + "attention.dense.weight"), bias)
        sa = p + "self_attn."
        return linear(o, self.w(sa + "o_proj.weight"), self.w(sa + "o_proj.bias") if a["o_bias"] else None)

    def mlp(self, l, x):
        a, p = self.arch, self.prefix(l)
        mt = a["model_type"]
        if mt == "gpt2":
            h = act_fn(a["act"], conv1d(x, self.w(p + "mlp.c_fc.weight"), self.w(p + "mlp.c_fc.bias")))
            return conv1d(h, self.w(p + "mlp.c_proj.weight"), self.w(p + "mlp.c_proj.bias"))
        if mt == "gpt_neox":
            h = act_fn(a["act"], linear(x, self.w(p + "mlp.dense_h_to_4h.weight"), self.w(p + "mlp.dense_h_to_4h.bias")))
            return linear(h, self.w(p + "mlp.dense_4h_to_h.weight"), self.w(p + "mlp.dense_4h_to_h.bias"))
        m, mb = p + "mlp.", a["mlp_bias"]
        g = linear(x, self.w(m + "gate_proj.weight"), self.w(m + "gate_proj.bias") if mb else None)
        u = linear(x, self.w(m + "up_proj.weight"), self.w(m + "up_proj.bias") if mb else None)
        return linear(act_fn(a["act"], g) * u, self.w(m + "down_proj.weight"), self.w(m + "down_proj.bias") if mb else None)

    def block(self, l, x, diag):
        a, p = self.arch, self.prefix(l)
        mt = a["model_type"]
        if mt == "gpt2":
            ln1, ln2 = p + "ln_1", p + "ln_2"
        else:
            ln1, ln2 = p + "input_layernorm", p + "post_attention_layernorm"
        blk = a["block"]
        if blk == "pre":
            x = x + self.attention(l, self.norm(x, ln1), diag)
            return x + self.mlp(l, self.norm(x, ln2))
        if blk == "parallel":  # GPT-NeoX use_parallel_residual: both branches read the block input
            return x + self.attention(l, self.norm(x, ln1), diag) + self.mlp(l, self.norm(x, ln2))
        if blk == "olmo2":  # norms after each sub-layer, inside the residual branch
            x = x + self.norm(self.attention(l, x, diag), p + "post_attention_layernorm")
            return x + self.norm(self.mlp(l, x), p + "post_feedforward_layernorm")
        if blk == "sandwich":  # Gemma 2/3: pre and post norms around each sub-layer
            x = x + self.norm(self.attention(l, self.norm(x, p + "input_layernorm"), diag), p + "post_attention_layernorm")
            return x + self.norm(self.mlp(l, self.norm(x, p + "pre_feedforward_layernorm")), p + "post_feedforward_layernorm")
        raise NotImplementedError(blk)

    # -- whole model ------------------------------------------------------------------------------
    def names(self):
        mt = self.arch["model_type"]
        if mt == "gpt2":
            return "transformer.wte.weight", "transformer.ln_f", "lm_head.weight"
        if mt == "gpt_neox":
            return "gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm", "embed_out.weight"
        return "model.embed_tokens.weight", "model.norm", "lm_head.weight"

    def forward(self, tokens):
        """tokens: int64 [B, T]. Returns (logits [B,T,V], hidden [L+1,B,T,d], diagnostics)."""
        a = self.arch
        emb_name, norm_name, head_name = self.names()
        self.used = set()
        diag = {}
        E = self.w(emb_name)
        x = E[tokens]
        if a.get("embed_scale") is not None:
            x = x * a["embed_scale"]
        if a["positions"] == "learned":
            x = x + self.w("transformer.wpe.weight")[: tokens.shape[1]][None]
        hidden = [x]
        for l in range(a["n_layers"]):
            x = self.block(l, x, diag)
            hidden.append(x)
        x = self.norm(x, norm_name)
        head = E if a["tied"] else self.w(head_name)
        logits = x @ head.T
        cap = a.get("final_logit_softcap")
        if cap is not None:
            raw = logits
            logits = cap * torch.tanh(logits / cap)
            diag["final_softcap"] = _softcap_diag(raw.detach(), logits.detach(), cap, None)
        unused = sorted(set(self.W) - self.used)
        if unused and self.require_all_used:
            raise ValueError(f"stored tensors the forward did not use: {unused}")
        return logits, torch.stack(hidden), diag


def cross_entropy(logits, targets):
    """Mean over the targets that are not -100."""
    V = logits.shape[-1]
    lp = torch.log_softmax(logits.reshape(-1, V), dim=-1)
    t = targets.reshape(-1)
    keep = t != -100
    return -lp[keep].gather(1, t[keep][:, None]).mean()


def _softcap_diag(raw, capped, cap, T):
    if T is not None:  # attention scores: only the causal (unmasked-by-causality) entries
        causal = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
        raw, capped = raw[..., causal], capped[..., causal]
    return {"cap": cap, "max_abs_before": float(raw.abs().max()),
            "max_abs_after": float(capped.abs().max()),
            "max_abs_change": float((raw - capped).abs().max()),
            "rel_change_at_max": float(1.0 - capped.abs().max() / raw.abs().max())}


def _entropy_diag(P, allowed):
    """Mean over heads and query positions >= 1 of entropy / log(number of visible keys):
    1 means uniform attention, 0 one-hot."""
    n = allowed.sum(-1).to(F64)  # [T]
    ent = -(P * torch.log(P.clamp_min(1e-300))).sum(-1)  # [B,H,T]
    ratio = ent[..., 1:] / torch.log(n[1:])
    return float(ratio.mean())
