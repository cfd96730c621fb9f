#!/usr/bin/env python3
"""Reference numbers for `spanprobe drift` (docs/metrics.md, "drift"), computed independently in float64.

Mode `hf` (default) builds fixtures/drift: perturbed copies of the committed tiny model
fixtures/hf/llama-f32 (every matrix W + eps * std(W) * N(0, 1), eps in NOISE; norms untouched) saved
as Hugging Face directories, the evaluation tokens, and every drift number of each copy against the
original. Mode `gguf` records the drift of every quantized copy in fixtures/gguf_models (llama-*.gguf,
written by another generator) against llama-f32.gguf, from `gguf.quants.dequantize` of their tensors.

Hidden states, logits and losses come from tools/hf_fixtures/forward64.py, the independent float64
forward that defines the residual stream h_0 .. h_L as spanprobe does (the embedding, then each block's
output, before the final norm; transformers' last output_hidden_states is after it). Everything else is
numpy float64. See README.md. Deterministic: fixed seeds, one CPU thread.

Usage: generate.py [--out DIR]                  (hf mode; default fixtures/drift)
       generate.py gguf [--models DIR] [--out FILE]   (default fixtures/gguf_models, fixtures/drift/gguf_ref.json)
"""

import argparse
import json
import os
import shutil
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

SOURCE = "llama-f32"                 # fixtures/hf/<SOURCE>
NOISE = [0.003, 0.03, 0.3]           # relative noise sizes of the perturbed copies
NOISE_SEED = 20261125                # copy k uses NOISE_SEED + k
TOKENS_SEED = 7
N_SEQS, SEQ = 4, 32                  # the evaluation set: N_SEQS windows of SEQ + 1 tokens
MATRICES = ["wq", "wk", "wv", "wo", "w1", "w2", "w3"]  # spanprobe's columns (analyzers/drift_weights.c)
HF_LEAF = {"wq": "self_attn.q_proj", "wk": "self_attn.k_proj", "wv": "self_attn.v_proj", "wo": "self_attn.o_proj",
           "w1": "mlp.gate_proj", "w3": "mlp.up_proj", "w2": "mlp.down_proj"}
GLOBAL = [("tok_embed", "model.embed_tokens.weight"), ("pos_embed", None), ("head", "lm_head.weight")]
TOL_HF_HIDDEN = 1e-4                 # forward64 against transformers float32 hooks, relative to max|h_l|

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------------
# drift numbers, float64


def cka_linear(x, y):
    """Linear CKA with centered columns, biased HSIC (Kornblith et al. 2019), as spanprobe's cka."""
    xc, yc = x - x.mean(0), y - y.mean(0)
    n = x.shape[0]

    def hsic(a, b):
        return float(np.sum((a.T @ b) ** 2)) / (n - 1) ** 2

    return hsic(xc, yc) / np.sqrt(hsic(xc, xc) * hsic(yc, yc))


def log_softmax(z):
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def rel_norms(w, w_ref):
    d = w - w_ref
    return (float(np.linalg.norm(d) / np.linalg.norm(w_ref)),
            float(np.linalg.norm(d, 2) / np.linalg.norm(w_ref, 2)))


def run_model(model, tokens):
    """forward64 on [B, SEQ + 1] windows: hidden [L+1, B*T, d], logits [B*T, V], targets [B*T]."""
    inputs = torch.tensor(tokens[:, :-1], dtype=torch.int64)
    with torch.no_grad():
        logits, hidden, _ = model.forward(inputs)
    L1, B, T, d = hidden.shape
    return hidden.numpy().reshape(L1, B * T, d), logits.numpy().reshape(B * T, -1), tokens[:, 1:].reshape(-1)


def drift_numbers(ref_run, run, w_ref, w, n_layers):
    """Every number of a drift report: ref_run/run from run_model, w_ref/w the float64 weights by name."""
    h_ref, z_ref, targets = ref_run
    h, z, _ = run
    out = {"rel_error": [], "cosine": [], "cka": []}
    for l in range(h.shape[0]):
        a, b = h_ref[l], h[l]
        out["rel_error"].append(float(np.linalg.norm(b - a) / np.linalg.norm(a)))
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        cos = np.where((na > 0) & (nb > 0), (a * b).sum(1) / np.maximum(na * nb, 1e-300), 0.0)
        out["cosine"].append(float(cos.mean()))
        out["cka"].append(float(cka_linear(a, b)))
    lp_ref, lp = log_softmax(z_ref), log_softmax(z)
    kl = (np.exp(lp_ref) * (lp_ref - lp)).sum(-1)
    top1 = (z_ref.argmax(-1) == z.argmax(-1)).astype(float)
    rows = np.arange(len(targets))
    out.update(kl=kl.tolist(), top1_match=top1.tolist(), kl_mean=float(kl.mean()),
               kl_p50=float(np.percentile(kl, 50)), kl_p99=float(np.percentile(kl, 99)), kl_max=float(kl.max()),
               top1_agreement=float(top1.mean()), loss_ref=float(-lp_ref[rows, targets].mean()),
               loss=float(-lp[rows, targets].mean()))
    # per token, the smaller of the two models' top-1 margins (best logit minus second): a near-tie may
    # flip the argmax in float32, so the test excuses a top-1 mismatch where this is tiny
    srt_ref, srt = np.sort(z_ref, -1), np.sort(z, -1)
    out["top1_margin"] = np.minimum(srt_ref[:, -1] - srt_ref[:, -2], srt[:, -1] - srt[:, -2]).tolist()
    frob = [[None] * len(MATRICES) for _ in range(n_layers)]
    spec = [[None] * len(MATRICES) for _ in range(n_layers)]
    for l in range(n_layers):
        for k, m in enumerate(MATRICES):
            name = f"model.layers.{l}.{HF_LEAF[m]}.weight"
            if name in w_ref:
                frob[l][k], spec[l][k] = rel_norms(w[name], w_ref[name])
    out["weight_rel_frobenius"], out["weight_rel_spectral"] = frob, spec
    g_frob, g_spec = [], []
    for _, name in GLOBAL:
        f, s = rel_norms(w[name], w_ref[name]) if name and name in w_ref else (None, None)
        g_frob.append(f)
        g_spec.append(s)
    out["weight_rel_frobenius_global"], out["weight_rel_spectral_global"] = g_frob, g_spec
    return out


# ------------------------------------------------------------------------------------------------
# hf mode


def token_stream(vocab):
    """The ids of tokens.txt: spanprobe cuts a token file into windows of SEQ + 1 that share their
    boundary token (window w is ids[w SEQ : w SEQ + SEQ + 1], analyzers/evalset.c)."""
    return np.random.default_rng(TOKENS_SEED).integers(0, vocab, size=N_SEQS * SEQ + 1)


def windows(stream):
    return np.stack([stream[w * SEQ: w * SEQ + SEQ + 1] for w in range(N_SEQS)])


def perturb(weights, eps, seed):
    """W + eps * std(W) * N(0, 1) for every matrix, in name order; 1-D tensors (norm gains) kept."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in sorted(weights):
        w = weights[name]
        if w.ndim == 2:
            w = w + eps * w.std() * rng.standard_normal(w.shape)
        out[name] = w.astype(np.float32)  # what the saved copy holds
    return out


def check_transformers(model_dir, hidden64):
    """The saved copy loads in transformers, whose float32 residual stream matches forward64's."""
    import transformers

    hf = transformers.LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    hf.eval()
    captured = []
    hooks = [layer.register_forward_hook(lambda mod, inp, out: captured.append(out[0] if isinstance(out, tuple) else out))
             for layer in hf.model.layers]
    tokens = torch.tensor(windows(token_stream(hf.config.vocab_size))[:, :-1], dtype=torch.int64)
    with torch.no_grad():
        out = hf(input_ids=tokens, output_hidden_states=True)
    for h in hooks:
        h.remove()
    hidden = [out.hidden_states[0]] + captured
    worst = 0.0
    for l, h in enumerate(hidden):
        ref = hidden64[l].reshape(h.shape)
        worst = max(worst, float(np.abs(h.double().numpy() - ref).max() / np.abs(ref).max()))
    if not worst <= TOL_HF_HIDDEN:
        raise RuntimeError(f"{model_dir}: transformers' hidden states differ from forward64's by {worst:.3g}")
    return worst


def save_copy(src_dir, dst_dir, weights):
    from safetensors.numpy import save_file

    os.makedirs(dst_dir)
    for name in ("config.json", "generation_config.json"):
        shutil.copyfile(os.path.join(src_dir, name), os.path.join(dst_dir, name))
    save_file(weights, os.path.join(dst_dir, "model.safetensors"), metadata={"format": "pt"})


def generate_hf(out):
    src = os.path.join(ROOT, "fixtures", "hf", SOURCE)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "ref"))
    ref_model = forward64.Model(src)
    w_ref = {k: v.numpy() for k, v in ref_model.W.items()}
    n_layers = ref_model.arch["n_layers"]
    stream = token_stream(w_ref["model.embed_tokens.weight"].shape[0])
    with open(os.path.join(tmp, "tokens.txt"), "w") as f:
        f.write(" ".join(str(int(t)) for t in stream) + "\n")
    tokens = windows(stream)
    ref_run = run_model(ref_model, tokens)
    manifest = {"generator": "tools/drift_ref/generate.py", "versions": PINS, "source": f"fixtures/hf/{SOURCE}",
                "noise": NOISE, "noise_seed": NOISE_SEED, "tokens_seed": TOKENS_SEED, "n_seqs": N_SEQS, "seq": SEQ,
                "copies": {}}
    for k, eps in enumerate(NOISE):
        name = f"{SOURCE}-noise{eps:g}"
        w32 = perturb(w_ref, eps, NOISE_SEED + k)
        save_copy(src, os.path.join(tmp, name), w32)
        model = forward64.Model(os.path.join(tmp, name))
        w = {key: v.numpy() for key, v in model.W.items()}
        numbers = drift_numbers(ref_run, run_model(model, tokens), w_ref, w, n_layers)
        numbers["transformers_f32_hidden_rel_diff"] = check_transformers(os.path.join(tmp, name),
                                                                          run_model(model, tokens)[0])
        numbers.update(reference=f"fixtures/hf/{SOURCE}", model=f"fixtures/drift/{name}", noise=eps)
        with open(os.path.join(tmp, "ref", name + ".json"), "w") as f:
            json.dump(numbers, f, indent=1)
            f.write("\n")
        manifest["copies"][name] = {"noise": eps, "kl_mean": numbers["kl_mean"],
                                    "rel_error_final": numbers["rel_error"][-1]}
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    if os.path.exists(out):
        if not os.path.exists(os.path.join(out, "manifest.json")):
            raise SystemExit(f"generate.py: {out} exists and holds no manifest.json; not replacing it")
        shutil.rmtree(out)
    os.rename(tmp, out)


# ------------------------------------------------------------------------------------------------
# gguf mode

GGUF_LEAF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


def gguf_field(reader, key):
    f = reader.fields[key]
    v = f.parts[f.data[0]]
    return v.tobytes().decode() if f.types and f.types[0].name == "STRING" else v.tolist()[0]


def unpermute(w, n_head):
    """Undo llama.cpp's convert_hf_to_gguf permutation of the q/k rows ("NORM" RoPE)."""
    rows = w.shape[0]  # llama.cpp reshapes rows to [head, 2, r/2] and swaps the last two: the inverse swaps back
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_model(path):
    """A forward64 model from a llama GGUF file: every tensor dequantized to float64, named as HF names it,
    and the config read from the metadata."""
    import gguf

    r = gguf.GGUFReader(path)
    if gguf_field(r, "general.architecture") != "llama":
        raise SystemExit(f"generate.py: {path}: only llama GGUF files are supported")
    n_head = gguf_field(r, "llama.attention.head_count")
    n_kv = gguf_field(r, "llama.attention.head_count_kv") if "llama.attention.head_count_kv" in r.fields else n_head
    W = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
        parts = t.name.split(".")
        if t.name == "token_embd.weight":
            name = "model.embed_tokens.weight"
        elif t.name == "output.weight":
            name = "lm_head.weight"
        elif t.name == "output_norm.weight":
            name = "model.norm.weight"
        elif parts[0] == "blk" and parts[2] in GGUF_LEAF:
            name = f"model.layers.{parts[1]}.{GGUF_LEAF[parts[2]]}.weight"
            if parts[2] == "attn_q":
                w = unpermute(w, n_head)
            elif parts[2] == "attn_k":
                w = unpermute(w, n_kv)
        else:
            continue  # rope_freqs and other derived tensors: the config carries them
        W[name] = torch.from_numpy(np.ascontiguousarray(w))
    d = gguf_field(r, "llama.embedding_length")
    cfg = {"model_type": "llama", "hidden_size": d, "num_hidden_layers": gguf_field(r, "llama.block_count"),
           "num_attention_heads": n_head, "num_key_value_heads": n_kv,
           "intermediate_size": gguf_field(r, "llama.feed_forward_length"),
           "rms_norm_eps": gguf_field(r, "llama.attention.layer_norm_rms_epsilon"),
           "vocab_size": W["model.embed_tokens.weight"].shape[0], "hidden_act": "silu",
           "tie_word_embeddings": "lm_head.weight" not in W,
           "max_position_embeddings": gguf_field(r, "llama.context_length")}
    if "llama.attention.key_length" in r.fields:
        cfg["head_dim"] = gguf_field(r, "llama.attention.key_length")
    rope = {"rope_type": "default", "rope_theta": gguf_field(r, "llama.rope.freq_base")
            if "llama.rope.freq_base" in r.fields else 10000.0}
    cfg["rope_parameters"] = rope
    m = forward64.Model.__new__(forward64.Model)
    m.cfg, m.arch, m.W = cfg, forward64.describe(cfg), W
    m.used, m.require_all_used = set(), True
    return m


def generate_gguf(models, out):
    manifest_path = os.path.join(models, "manifest.json")
    if not os.path.exists(manifest_path):
        raise SystemExit(f"generate.py: {manifest_path} is missing (fixtures/gguf_models is written by another tool)")
    ref = gguf_model(os.path.join(models, "llama-f32.gguf"))
    w_ref = {k: v.numpy() for k, v in ref.W.items()}
    vocab = w_ref["model.embed_tokens.weight"].shape[0]
    with open(os.path.join(ROOT, "fixtures", "drift", "tokens.txt")) as f:  # modulo the vocabulary, as the test
        tokens = windows(np.array([int(t) % vocab for t in f.read().split()]))
    ref_run = run_model(ref, tokens)
    result = {"generator": "tools/drift_ref/generate.py gguf", "versions": PINS, "reference": "llama-f32.gguf",
              "tokens": "fixtures/drift/tokens.txt, each id modulo the vocabulary", "models": {}}
    for name in sorted(os.listdir(models)):
        if not (name.startswith("llama-") and name.endswith(".gguf")) or name == "llama-f32.gguf":
            continue
        m = gguf_model(os.path.join(models, name))
        w = {k: v.numpy() for k, v in m.W.items()}
        result["models"][name] = drift_numbers(ref_run, run_model(m, tokens), w_ref, w, ref.arch["n_layers"])
    with open(out + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", default="hf", choices=["hf", "gguf"])
    ap.add_argument("--out", help="hf: the fixtures directory; gguf: the JSON file")
    ap.add_argument("--models", default=os.path.join(ROOT, "fixtures", "gguf_models"), help="gguf: the model files")
    args = ap.parse_args()
    if args.mode == "hf":
        generate_hf(os.path.abspath(args.out or os.path.join(ROOT, "fixtures", "drift")))
    else:
        generate_gguf(args.models, args.out or os.path.join(ROOT, "fixtures", "drift", "gguf_ref.json"))


if __name__ == "__main__":
    main()
