#!/usr/bin/env python3
"""Writes fixtures/smollm2/: transformers' references for SmolLM2-135M-Instruct in GGUF (the tests'
real model, tools/fetch_smollm2.sh) for tests/test_smollm2.c. See tools/smollm2_ref/README.md.

Run from the repository root with the pinned versions (requirements.txt beside this file), after
`make data` (data/models/SmolLM2-135M-Instruct.Q4_1.gguf and data/mobydick.txt):
    python tools/smollm2_ref/generate.py [--out DIR]
Deterministic: two runs write the same files.
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
from collections import Counter

PINS = {"torch": "2.15.0", "transformers": "5.23.0", "tokenizers": "0.23.3", "gguf": "0.19.0",
        "numpy": "2.4.6", "accelerate": "1.15.0"}


def check_pins():
    for package, pinned in PINS.items():
        found = importlib.metadata.version(package)
        if found.split("+")[0] != pinned:  # a local suffix (torch 2.15.0+cpu) is the pinned version
            sys.exit(f"generate.py: {package} is {found}, expected {pinned} (tools/smollm2_ref/requirements.txt)")


check_pins()

import gguf  # noqa: E402  (after the version check)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import pre_tokenizers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

MODEL_DIR = "data/models"
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # tools/fetch_smollm2.sh
TEXT = "data/mobydick.txt"
TEXT_SHA256 = "870fe07753b139bbcbcf45a6de27e4ec620434972ec78c08267655003333f0f8"  # tools/fetch_data.sh
SPAN_BYTES = 64 * 1024      # the tokenizer span: this many bytes, cut after the last line end
EXCERPT_BYTES = 4 * 1024    # the committed excerpt, cut the same way
LOGIT_TOKENS = 64           # the logits text: the first 64 tokens of the span
FULL_POSITIONS = [0, 1, 31, 63]
NEW_TOKENS = 32
# Prompts whose greedy steps all lead by far more than float32 rounding can move (the manifest's
# margins): "Call me Ishmael." alone meets a near-tie (0.0065) within 32 steps.
PROMPTS = {
    "ishmael": "Call me Ishmael. Some years ago--never mind how long precisely--having little or no money in my "
               "purse, and nothing particular to interest me on shore, I thought I would sail about a little and "
               "see the watery part of the world.",
    "chat": None,  # the chat template around CHAT_QUESTION
}
CHAT_QUESTION = "What is the capital of France?"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def cut_at_line(data, n):
    return data[:data.rindex(b"\n", 0, n) + 1]


def ids_text(ids):
    """Whitespace-separated, 20 to a line: what `spanprobe tokenize` prints."""
    return "".join(f"{t}{chr(10) if i + 1 == len(ids) or i % 20 == 19 else ' '}" for i, t in enumerate(ids))


def model_summary(path):
    r = gguf.GGUFReader(path)
    keys = ["general.architecture", "llama.block_count", "llama.context_length", "llama.embedding_length",
            "llama.feed_forward_length", "llama.attention.head_count", "llama.attention.head_count_kv",
            "llama.rope.freq_base", "llama.rope.dimension_count", "llama.attention.layer_norm_rms_epsilon",
            "llama.vocab_size", "general.file_type", "tokenizer.ggml.model", "tokenizer.ggml.pre",
            "tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"]
    meta = {k: r.fields[k].contents() for k in keys if k in r.fields}
    meta["tokenizer.ggml.tokens"] = len(r.fields["tokenizer.ggml.tokens"].data)
    meta["tokenizer.ggml.merges"] = len(r.fields["tokenizer.ggml.merges"].data)
    types = Counter(t.tensor_type.name for t in r.tensors)
    return {"gguf_version": int(r.fields["GGUF.version"].contents()), "metadata": meta,
            "tensor_count": len(r.tensors), "tensor_types": dict(sorted(types.items())),
            "tensor_types_by_name": {t.name: t.tensor_type.name for t in r.tensors
                                     if t.name.startswith(("token_embd", "output", "blk.0."))}}


def rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def forward64(p, cfg, ids):
    """An independent float64 Llama forward on transformers' (dequantized, un-permuted) weights p, in
    float64: every operation in float64, unlike model.double(), whose RoPE angles and norms keep
    float32 steps."""
    n_h, n_kv, hd, eps = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.rms_norm_eps
    T = len(ids)
    inv = 1.0 / (cfg.rope_parameters["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat((ang.cos(), ang.cos()), -1)[:, None, :], torch.cat((ang.sin(), ang.sin()), -1)[:, None, :]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = p["model.embed_tokens.weight"][torch.tensor(ids)]
    for layer in range(cfg.num_hidden_layers):
        b = f"model.layers.{layer}."
        h = rms(x, p[b + "input_layernorm.weight"], eps)
        q = (h @ p[b + "self_attn.q_proj.weight"].T).view(T, n_h, hd)
        k = (h @ p[b + "self_attn.k_proj.weight"].T).view(T, n_kv, hd)
        v = (h @ p[b + "self_attn.v_proj.weight"].T).view(T, n_kv, hd)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(n_h // n_kv, 1), v.repeat_interleave(n_h // n_kv, 1)
        att = torch.softmax(torch.einsum("thd,shd->hts", q, k) / hd ** 0.5 + mask, -1)
        x = x + torch.einsum("hts,shd->thd", att, v).reshape(T, n_h * hd) @ p[b + "self_attn.o_proj.weight"].T
        h = rms(x, p[b + "post_attention_layernorm.weight"], eps)
        ffn = torch.nn.functional.silu(h @ p[b + "mlp.gate_proj.weight"].T) * (h @ p[b + "mlp.up_proj.weight"].T)
        x = x + ffn @ p[b + "mlp.down_proj.weight"].T
    return rms(x, p["model.norm.weight"], eps) @ p["model.embed_tokens.weight"].T  # tied head


def margins(logits):
    """Per row: argmax and top-1 minus top-2."""
    top = torch.topk(logits, 2, -1)
    return top.indices[:, 0].tolist(), (top.values[:, 0] - top.values[:, 1]).tolist()


def greedy(step_logits, prompt_ids, eos):
    """Greedy decoding as `spanprobe generate` does it: the whole sequence each step, no cache, stop at
    BOS or EOS (not kept). step_logits(ids) is the last position's logits."""
    ids, new, gaps = list(prompt_ids), [], []
    for _ in range(NEW_TOKENS):
        top, gap = margins(step_logits(ids)[None, :])
        if top[0] in eos:
            gaps.append(gap[0])
            break
        ids.append(top[0])
        new.append(top[0])
        gaps.append(gap[0])
    return new, gaps


def r(x, digits=9):
    return float(f"{x:.{digits}g}")


def generate(out):
    path = os.path.join(MODEL_DIR, MODEL_NAME)
    with open(path, "rb") as f:
        if sha256(f.read()) != MODEL_SHA256:
            sys.exit(f"generate.py: {path}: not the pinned model (tools/fetch_smollm2.sh)")
    with open(TEXT, "rb") as f:
        text = f.read()
    if sha256(text) != TEXT_SHA256:
        sys.exit(f"generate.py: {TEXT}: not the pinned text (tools/fetch_data.sh)")
    torch.manual_seed(0)
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=MODEL_NAME)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, gguf_file=MODEL_NAME, dtype=torch.float32).eval()
    cfg = model.config
    sd = {k: v.detach().to(torch.float64) for k, v in model.state_dict().items()}
    manifest = {"generator": "tools/smollm2_ref/generate.py", "versions": PINS,
                "model": {"file": MODEL_NAME, "sha256": MODEL_SHA256, **model_summary(path)},
                "transformers_config": {k: getattr(cfg, k) for k in (
                    "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                    "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps", "rope_parameters",
                    "tie_word_embeddings", "bos_token_id", "eos_token_id")}}

    # (a) the tokenizer on a long span of Moby Dick, with and without special tokens
    span, excerpt = cut_at_line(text, SPAN_BYTES), cut_at_line(text, EXCERPT_BYTES)
    with open(os.path.join(out, "mobydick_head.txt"), "wb") as f:
        f.write(excerpt)
    digits = tok.backend_tokenizer.__class__.from_str(tok.backend_tokenizer.to_str())
    digits.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                    pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tokenizer = {"text": TEXT, "text_sha256": TEXT_SHA256, "pre_tokenizer": str(tok.backend_tokenizer.pre_tokenizer),
                 "post_processor": str(tok.backend_tokenizer.post_processor), "add_bos_token": tok.add_bos_token}
    for name, data in (("span", span), ("excerpt", excerpt)):
        s = data.decode("utf-8")
        ids = tok(s).input_ids
        plain = tok(s, add_special_tokens=False).input_ids
        split = digits.encode(s, add_special_tokens=False).ids
        fname = f"mobydick_{name}.ids"
        with open(os.path.join(out, fname), "w", encoding="ascii") as f:
            f.write(ids_text(ids))
        tokenizer[name] = {
            "bytes": [0, len(data)], "sha256": sha256(data), "ids_file": fname, "count": len(ids),
            "ids_sha256_int32le": sha256(np.asarray(ids, dtype="<i4").tobytes()),
            "same_without_special_tokens": ids == plain,
            "decode_roundtrip": tok.decode(ids) == s,
            # llama.cpp's `smollm` pre-tokenizer (and SmolLM2's own tokenizer.json) split digits one by
            # one; transformers' GGUF loader knows no `smollm` split and keeps GPT-2's regex
            "digit_split_count": len(split), "digit_split_differs_at": next(
                (i for i, (a, b) in enumerate(zip(ids, split)) if a != b), None)}
        if not tokenizer[name]["same_without_special_tokens"]:
            with open(os.path.join(out, f"mobydick_{name}.nobos.ids"), "w", encoding="ascii") as f:
                f.write(ids_text(plain))
    tokenizer["excerpt"]["file"] = "mobydick_head.txt"
    manifest["tokenizer"] = tokenizer

    # (b) logits on the first LOGIT_TOKENS tokens of the span: transformers float32 and float64
    ids = tok(span.decode("utf-8")).input_ids[:LOGIT_TOKENS]
    with torch.no_grad():
        l32 = model(torch.tensor([ids]), use_cache=False).logits[0].double()
        l64 = forward64(sd, cfg, ids)
    scale = l64.abs().max().item()
    arg64, gap64 = margins(l64)
    arg32, _ = margins(l32)
    with open(os.path.join(out, "logits_tokens.ids"), "w", encoding="ascii") as f:
        f.write(ids_text(ids))
    l64[FULL_POSITIONS].numpy().astype("<f4").tofile(os.path.join(out, "logits_f64.f32"))
    manifest["logits"] = {
        "tokens_file": "logits_tokens.ids", "tokens": ids,
        "file": "logits_f64.f32", "positions": FULL_POSITIONS, "layout": "float32 little-endian [positions, vocab]",
        "computed_in": "float64 (forward64 in generate.py), rounded to float32 when written",
        "max_abs": r(scale),
        "transformers_f32_max_abs_diff_rel": r(((l32 - l64).abs().max() / scale).item(), 4),
        "transformers_f32_argmax_equal": arg32 == arg64,
        "argmax": arg64, "top1_minus_top2": [r(g, 6) for g in gap64],
        "max_abs_by_position": [r(v) for v in l64.abs().max(-1).values.tolist()]}
    if manifest["logits"]["transformers_f32_max_abs_diff_rel"] > 1e-4:
        sys.exit("generate.py: transformers float32 and the float64 forward disagree beyond 1e-4 of max|logit|")

    # (c) greedy decoding: float32 transformers as a user runs it, checked against generate() with its
    # KV cache and against the float64 forward
    chat = tok.apply_chat_template([{"role": "user", "content": CHAT_QUESTION}], add_generation_prompt=True,
                                   tokenize=False)
    eos = {cfg.bos_token_id, cfg.eos_token_id}
    runs = []
    for name, prompt in PROMPTS.items():
        prompt = prompt if prompt is not None else chat
        p_ids = tok(prompt).input_ids
        with torch.no_grad():
            new32, gaps32 = greedy(lambda s: model(torch.tensor([s]), use_cache=False).logits[0, -1], p_ids, eos)
            new64, gaps64 = greedy(lambda s: forward64(sd, cfg, s)[-1], p_ids, eos)
            cached = model.generate(torch.tensor([p_ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                    use_cache=True, eos_token_id=sorted(eos), pad_token_id=cfg.eos_token_id)
        cached = [t for t in cached[0, len(p_ids):].tolist() if t not in eos]
        stopped = len(new32) < NEW_TOKENS
        runs.append({
            "name": name, "prompt": prompt, "prompt_ids": p_ids, "new_ids": new32,
            "stopped_at_eos": stopped,
            # `spanprobe generate --steps N` counts the prompt's tokens after the first
            "steps_arg": len(p_ids) - 1 + NEW_TOKENS,
            "stdout": tok.decode(p_ids + new32) + "\n",
            "new_text": tok.decode(new32),
            "same_with_kv_cache": cached == new32, "same_in_float64": new64 == new32,
            "top1_minus_top2_f32": [r(g, 6) for g in gaps32], "top1_minus_top2_f64": [r(g, 6) for g in gaps64],
            "min_margin_f64": r(min(gaps64), 6)})
    manifest["greedy"] = runs
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="fixtures/smollm2")
    out = parser.parse_args().out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    generate(tmp)
    if os.path.exists(out):
        if not os.path.exists(os.path.join(out, "manifest.json")):
            sys.exit(f"generate.py: {out} exists and holds no manifest.json; not replacing it")
        shutil.rmtree(out)
    os.rename(tmp, out)
    print(f"generate.py: wrote {out}")


if __name__ == "__main__":
    main()
