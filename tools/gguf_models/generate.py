#!/usr/bin/env python3
"""Builds fixtures/gguf_models: tiny GGUF models written with gguf.GGUFWriter as llama.cpp's
convert_hf_to_gguf.py would write them, and float64 reference logits for each.

* hf-<name>.gguf: the Hugging Face fixtures of tools/hf_fixtures (fixtures/hf/<dir>) converted in F32
  (llama.cpp tensor names and <arch>.* keys, llama's q/k rows permuted into pairs, Gemma norm gains
  with the 1 of (1 + w) added, GPT-2's Conv1D weights transposed, GPT-NeoX's fused q/k/v split into
  q, k, v parts). References: transformers in float64 on the same directory and tokens.
* llama-<type>.gguf: one random llama with every matrix row 256 long (K-quant super-blocks), in F32,
  F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (gguf.quants.quantize) and Q2_K..Q6_K (round-to-nearest encoders
  below; gguf 0.19.0 reads but cannot write them). References: transformers in float64 with the
  weights gguf.quants.dequantize reads back from each file's blocks.

manifest.json lists every file with its reference. Deterministic: fixed seeds, one CPU thread.
Usage: generate.py [--out DIR]   (default: fixtures/gguf_models under the repository root)
"""

import argparse
import importlib.metadata
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from pins import check_versions  # noqa: E402

PINS = check_versions(os.path.join(HERE, "requirements.txt"))

import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools", "hf_fixtures"))
import forward64  # noqa: E402  (the independent float64 forward of tools/hf_fixtures)

torch.set_num_threads(1)
QK_K = 256

# ---- K-quant encoders: round to nearest, the block layouts gguf.quants' dequantizers read ----


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def f16_bytes(x):
    return f16(x).reshape(-1, 1).view(np.uint8)


def asymmetric(x, sub, qmax, smax):
    """y = d sc q - dmin mn per sub-block of `sub` values: q in 0..qmax, sc and mn in 0..smax."""
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    lo = np.minimum(xs.min(axis=-1), 0.0)
    scale, mins = (xs.max(axis=-1) - lo) / qmax, -lo
    d = f16(scale.max(axis=-1) / smax).astype(np.float32)
    dmin = f16(mins.max(axis=-1) / smax).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.clip(np.nan_to_num(np.rint(scale / d[:, None])), 0, smax).astype(np.uint8)
        mn = np.clip(np.nan_to_num(np.rint(mins / dmin[:, None])), 0, smax).astype(np.uint8)
        step = (d[:, None] * sc)[..., None]
        q = np.nan_to_num(np.rint((xs + (dmin[:, None] * mn)[..., None]) / step))
    q = np.clip(q, 0, qmax).astype(np.uint8).reshape(n, QK_K)
    return d, dmin, sc, mn, q


def symmetric(x, sub, qneg, smax):
    """y = d sc q per sub-block: q in -qneg..qneg-1, sc in 0..smax."""
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    scale = np.abs(xs).max(axis=-1) / qneg
    d = f16(scale.max(axis=-1) / smax).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.clip(np.nan_to_num(np.rint(scale / d[:, None])), 0, smax).astype(np.int32)
        q = np.nan_to_num(np.rint(xs / (d[:, None] * sc)[..., None]))
    q = np.clip(q, -qneg, qneg - 1).astype(np.int32).reshape(n, QK_K)
    return d, sc, q


def pack_bits(q, groups, width):
    """q (n, groups * (8 // width) * L) as groups of L bytes: value k of a group at bits width*k."""
    n = q.shape[0]
    q = q.astype(np.uint8).reshape(n, groups, 8 // width, -1)
    out = np.zeros((n, groups, q.shape[-1]), dtype=np.uint8)
    for k in range(8 // width):
        out |= (q[:, :, k, :] << (width * k)).astype(np.uint8)
    return out.reshape(n, -1)


def pack_scales_k(sc, mn):
    """Q4_K/Q5_K's 12 bytes of eight 6-bit scales and mins."""
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    d = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    m = mn[:, :4] | ((mn[:, 4:] >> 4) << 6)
    md = (sc[:, 4:] & 15) | ((mn[:, 4:] & 15) << 4)
    return np.concatenate([d, m, md], axis=1).astype(np.uint8)


def encode_q2_k(x):
    d, dmin, sc, mn, q = asymmetric(x, 16, 3, 15)
    return np.concatenate([sc | (mn << 4), pack_bits(q, 2, 2), f16_bytes(d), f16_bytes(dmin)], axis=1)


def encode_q3_k(x):
    d, sc, q = symmetric(x, 16, 4, 31)
    u = (q + 4).astype(np.uint8)  # low 2 bits in qs; the high bit set means q >= 0
    s = (sc + 32).astype(np.uint8)
    low = pack_bits(s & 15, 1, 4)                 # scale i: byte i % 8, nibble i // 8
    high = pack_bits(s >> 4, 1, 2)                # scale i: byte i % 4, bits 2 (i // 4)
    return np.concatenate([pack_bits(u >> 2, 1, 1), pack_bits(u & 3, 2, 2), low, high, f16_bytes(d)], axis=1)


def encode_q4_k(x):
    d, dmin, sc, mn, q = asymmetric(x, 32, 15, 63)
    return np.concatenate([f16_bytes(d), f16_bytes(dmin), pack_scales_k(sc, mn), pack_bits(q, 4, 4)], axis=1)


def encode_q5_k(x):
    d, dmin, sc, mn, q = asymmetric(x, 32, 31, 63)
    return np.concatenate([f16_bytes(d), f16_bytes(dmin), pack_scales_k(sc, mn), pack_bits(q >> 4, 1, 1),
                           pack_bits(q & 15, 4, 4)], axis=1)


def encode_q6_k(x):
    d, sc, q = symmetric(x, 16, 32, 127)
    u = (q + 32).astype(np.uint8)
    return np.concatenate([pack_bits(u & 15, 2, 4), pack_bits(u >> 4, 2, 2), sc.astype(np.int8).view(np.uint8),
                           f16_bytes(d)], axis=1)


K_ENCODERS = {Q.Q2_K: encode_q2_k, Q.Q3_K: encode_q3_k, Q.Q4_K: encode_q4_k, Q.Q5_K: encode_q5_k,
              Q.Q6_K: encode_q6_k}
# worst relative error (max |w - w'| / max |w|) each encoder must reach: a wrong packing fails it
K_BOUNDS = {Q.Q2_K: 0.7, Q.Q3_K: 0.4, Q.Q4_K: 0.2, Q.Q5_K: 0.1, Q.Q6_K: 0.06}


def quantize(w, qtype):
    """(stored bytes or floats, what gguf.quants.dequantize reads back as float32)."""
    if qtype == Q.F32:
        return w, w
    if qtype == Q.F16:
        return w.astype(np.float16), w.astype(np.float16).astype(np.float32)
    if qtype in K_ENCODERS:
        data = K_ENCODERS[qtype](w.reshape(-1, QK_K)).reshape(*w.shape[:-1], -1)
    else:
        data = gguf.quants.quantize(w, qtype)
    back = np.asarray(gguf.quants.dequantize(data, qtype), dtype=np.float32).reshape(w.shape)
    err = np.abs(back - w).max() / np.abs(w).max()
    assert qtype not in K_BOUNDS or err < K_BOUNDS[qtype], (qtype.name, err)
    return data, back


# ---- conversion as convert_hf_to_gguf.py does it ----


def permute(w, n_head):
    """llama's q/k rows: rotate_half pairs (i, i + r/2) to neighbouring pairs (2i, 2i + 1)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


LLAMA_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_NAMES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm", "post_feedforward_layernorm": "post_ffw_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    # GPT-2 and GPT-NeoX
    "ln_1": "attn_norm", "ln_2": "ffn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
    "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down", "attention.query_key_value": "attn_qkv",
    "attention.dense": "attn_output", "mlp.dense_h_to_4h": "ffn_up", "mlp.dense_4h_to_h": "ffn_down",
}
GLOBAL_NAMES = {
    "transformer.wte.weight": "token_embd.weight", "transformer.wpe.weight": "position_embd.weight",
    "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias",
    "gpt_neox.embed_in.weight": "token_embd.weight", "gpt_neox.final_layer_norm.weight": "output_norm.weight",
    "gpt_neox.final_layer_norm.bias": "output_norm.bias", "embed_out.weight": "output.weight", **LLAMA_NAMES,
}
SKIPPED = (".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq")


def gguf_name(arch, name):
    if name in GLOBAL_NAMES:
        return GLOBAL_NAMES[name]
    parts = name.split(".")
    i = parts.index("layers") if "layers" in parts else parts.index("h")
    layer, rest, suffix = parts[i + 1], ".".join(parts[i + 2:-1]), parts[-1]
    if rest == "post_attention_layernorm":  # the pre-FFN norm of llama, GPT-NeoX; a post-norm elsewhere
        base = "post_attention_norm" if arch in ("gemma2", "gemma3", "olmo2") else "ffn_norm"
    elif rest == "input_layernorm":
        base = "attn_norm"
    else:
        base = LAYER_NAMES[rest]
    return f"blk.{layer}.{base}.{suffix}"


def convert(arch, cfg, tensors):
    """HF tensors (name -> float32 array) as (gguf name, float32 array) in converter order."""
    out = []
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"] if "hidden_size" in cfg else 0
    for name, w in tensors.items():
        if name.endswith(SKIPPED):
            continue
        new = gguf_name(arch, name)
        if arch == "llama" and new.endswith(("attn_q.weight", "attn_q.bias")):
            w = permute(w, cfg["num_attention_heads"])
        if arch == "llama" and new.endswith(("attn_k.weight", "attn_k.bias")):
            w = permute(w, cfg["num_key_value_heads"])
        if arch.startswith("gemma") and name.endswith("norm.weight"):
            w = w + 1
        if arch == "gpt2" and new.endswith(("attn_qkv.weight", "attn_output.weight", "ffn_up.weight",
                                            "ffn_down.weight")):
            w = w.T
        if arch == "gptneox" and ".attn_qkv." in new:
            n_head = cfg["num_attention_heads"]
            w = w.reshape(n_head, 3, head_dim, *w.shape[1:]).swapaxes(0, 1).reshape(w.shape)
        out.append((new, np.ascontiguousarray(w, dtype=np.float32)))
        if arch == "gpt2" and new == "token_embd.weight":  # the converter stores the tied head again
            out.append(("output.weight", np.ascontiguousarray(w, dtype=np.float32)))
    return out


def metadata(arch, cfg):
    """[(key below <arch>., value, type)] as the converter writes them."""
    u, f, b = gguf.GGUFValueType.UINT32, gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.BOOL
    if arch == "gpt2":
        return [("context_length", cfg["n_positions"], u), ("embedding_length", cfg["n_embd"], u),
                ("feed_forward_length", cfg.get("n_inner") or 4 * cfg["n_embd"], u),
                ("block_count", cfg["n_layer"], u), ("attention.head_count", cfg["n_head"], u),
                ("attention.layer_norm_epsilon", cfg["layer_norm_epsilon"], f)]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    kvs = [("context_length", cfg["max_position_embeddings"], u), ("embedding_length", cfg["hidden_size"], u),
           ("block_count", cfg["num_hidden_layers"], u), ("feed_forward_length", cfg["intermediate_size"], u),
           ("attention.head_count", cfg["num_attention_heads"], u)]
    if arch == "gptneox":
        partial = cfg.get("rope_parameters", {}).get("partial_rotary_factor", cfg.get("rotary_pct", 0.25))
        return kvs + [("rope.dimension_count", int(partial * head_dim), u),
                      ("use_parallel_residual", cfg.get("use_parallel_residual", True), b),
                      ("attention.layer_norm_epsilon", cfg["layer_norm_eps"], f)]
    rope = cfg.get("rope_parameters") or {}
    assert rope.get("rope_type", "default") == "default", "only default RoPE converts without rope_freqs"
    kvs += [("attention.head_count_kv", cfg.get("num_key_value_heads", cfg["num_attention_heads"]), u),
            ("attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"], f),
            ("rope.freq_base", rope.get("rope_theta", 10000.0), f),
            ("attention.key_length", head_dim, u), ("attention.value_length", head_dim, u),
            ("rope.dimension_count", head_dim, u)]
    if arch == "gemma2":
        kvs += [("attn_logit_softcapping", cfg["attn_logit_softcapping"], f),
                ("final_logit_softcapping", cfg["final_logit_softcapping"], f),
                ("attention.sliding_window", cfg["sliding_window"], u)]
    return kvs


def write_gguf(path, arch, kvs, tensors, qtype=Q.F32):
    """tensors: [(name, float32 array)]; matrices stored as qtype, vectors in F32 (as llama.cpp's
    quantize leaves norms and biases). Returns {name: the float32 values a reader gets back}."""
    w = gguf.GGUFWriter(path, arch)
    w.add_name(os.path.basename(path))
    for key, value, vtype in kvs:
        w.add_key_value(f"{arch}.{key}", value, vtype)
    back = {}
    for name, x in tensors:
        t = qtype if x.ndim == 2 else Q.F32
        data, back[name] = quantize(x, t)
        w.add_tensor(name, data, raw_dtype=None if data.dtype in (np.float32, np.float16) else t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return back


# ---- references: forward64's float64 forward (transformers' own rounds RoPE through float32) ----


def logits64(directory, tokens, overrides=None, weights=None):
    """float64 logits of the model in directory, with config values and weights replaced."""
    m = forward64.Model(directory)
    if overrides:
        m.cfg.update(overrides)
        m.arch = forward64.describe(m.cfg)
    for name, w in (weights or {}).items():
        m.W[name] = torch.from_numpy(np.asarray(w, dtype=np.float64))
    with torch.no_grad():
        return m.forward(torch.tensor(tokens))[0].to(torch.float64).numpy()


# HF fixture -> GGUF architecture, and config values llama.cpp's runtime implies
HF_FIXTURES = [
    ("llama-mqa-tied-f32", "llama", {}),
    ("qwen2-f32", "qwen2", {}),
    ("qwen3-f32", "qwen3", {}),
    ("olmo2-f32", "olmo2", {}),
    ("gemma-f32", "gemma", {}),
    # llama.cpp scales Gemma 2 scores by 1/sqrt(head_dim) (query_pre_attn_scalar is not stored)
    ("gemma2-f32", "gemma2", {"query_pre_attn_scalar": 16}),
    ("gpt2-f32", "gpt2", {}),
    ("gpt_neox-parallel-f32", "gptneox", {}),
]

LLAMA_TYPES = [Q.F32, Q.F16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]


def save_ref(out, stem, logits, tokens, entry):
    logits.astype("<f8").tofile(os.path.join(out, f"{stem}.logits_f64.f64"))
    entry.update({"tokens": tokens, "logits_f64": {"file": f"{stem}.logits_f64.f64", "shape": list(logits.shape)}})
    return entry


def hf_fixture(out, directory, arch, overrides):
    src = os.path.join(ROOT, "fixtures", "hf", directory)
    cfg = json.load(open(os.path.join(src, "config.json")))
    tensors = load_file(os.path.join(src, "model.safetensors"))
    tensors = {k: v.astype(np.float32) for k, v in tensors.items()}
    stem = f"hf-{directory}"
    back = write_gguf(os.path.join(out, f"{stem}.gguf"), arch, metadata(arch, cfg), convert(arch, cfg, tensors))
    # Gemma's gains are stored as float32(1 + w): the reference reads w back from them exactly
    weights = {name: back[gguf_name(arch, name)].astype(np.float64) - 1 for name in tensors
               if arch.startswith("gemma") and name.endswith("norm.weight")}
    tokens = json.load(open(os.path.join(ROOT, "fixtures", "hf", "ref", f"{directory}.json")))["tokens"]
    logits = logits64(src, tokens, overrides, weights)
    if not overrides and not weights:  # the same model as fixtures/hf's: the same reference
        ref = np.fromfile(os.path.join(ROOT, "fixtures", "hf", "ref", f"{directory}.logits_f64.f64"), "<f8")
        assert np.array_equal(ref, logits.ravel()), directory
    return save_ref(out, stem, logits, tokens, {"file": f"{stem}.gguf", "arch": arch, "type": "F32",
                                                "from": f"fixtures/hf/{directory}", "config_overrides": overrides})


def llama_d256():
    """A random llama whose matrices all have rows of 256 (K-quant super-blocks), in float64."""
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=256, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=1, head_dim=64, vocab_size=64,
                                   max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
                                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    torch.manual_seed(20260601)
    model = transformers.LlamaForCausalLM(cfg).to(torch.float64).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif "embed" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * (1.3 if "q_proj" in name or "k_proj" in name else 1.0)
                        / p.shape[1] ** 0.5)
    return model


def llama_family(out):
    model = llama_d256()
    cfg = model.config.to_dict()
    hf = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    converted = convert("llama", cfg, hf)
    rng = np.random.default_rng(4321)
    tokens = rng.integers(0, cfg["vocab_size"], (2, 16)).tolist()
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        model.to(torch.float32).save_pretrained(tmp)  # config.json and safetensors for forward64
        for qtype in LLAMA_TYPES:
            stem = f"llama-{qtype.name.lower()}"
            back = write_gguf(os.path.join(out, f"{stem}.gguf"), "llama", metadata("llama", cfg), converted, qtype)
            weights, errors = {}, {}
            for name, w in hf.items():  # the weights read back, in Hugging Face's layout again
                v = back[gguf_name("llama", name)]
                if name.endswith("q_proj.weight"):
                    v = unpermute(v, cfg["num_attention_heads"])
                if name.endswith("k_proj.weight"):
                    v = unpermute(v, cfg["num_key_value_heads"])
                weights[name] = v
                errors[gguf_name("llama", name)] = float(np.linalg.norm(v - w) / np.linalg.norm(w))
            entries.append(save_ref(out, stem, logits64(tmp, tokens, weights=weights), tokens,
                                    {"file": f"{stem}.gguf", "arch": "llama", "type": qtype.name,
                                     "from": "tools/gguf_models/generate.py llama_d256 (seed 20260601)",
                                     "weight_rel_frobenius_error": errors}))
    return entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "fixtures", "gguf_models"))
    out = parser.parse_args().out
    if os.path.exists(out) and not os.path.exists(os.path.join(out, "manifest.json")):
        sys.exit(f"generate.py: {out} exists and holds no manifest.json; not replacing it")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    models = [hf_fixture(out, d, a, o) for d, a, o in HF_FIXTURES] + llama_family(out)
    manifest = {"generator": "tools/gguf_models/generate.py",
                "versions": {"python": sys.version.split()[0], **{p: importlib.metadata.version(p) for p in PINS}},
                "pins": PINS, "models": models}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
