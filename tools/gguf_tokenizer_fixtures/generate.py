#!/usr/bin/env python3
"""Writes fixtures/gguf_tokenizers/: small GGUF files holding only tokenizer metadata, written as
llama.cpp's convert_hf_to_gguf.py writes it from the Hugging Face tokenizers of fixtures/tokenizers/,
and the ids transformers' GGUF tokenizer (AutoTokenizer.from_pretrained(dir, gguf_file=...)) gives,
for tests/test_gguf_tokenizer.c. See tools/gguf_tokenizer_fixtures/README.md.

Run from the repository root with the pinned versions (requirements.txt beside this file):
    python tools/gguf_tokenizer_fixtures/generate.py [--out DIR] [--data ../shared/data/mobydick.txt]
Deterministic: two runs write byte-identical files.
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import struct
import sys

PINS = {"gguf": "0.19.0", "numpy": "2.4.6", "tokenizers": "0.23.3", "transformers": "5.23.0"}


def check_pins():
    for package, pinned in PINS.items():
        found = importlib.metadata.version(package)
        if found != pinned:
            sys.exit(f"generate.py: {package} is {found}, expected {pinned} "
                     "(tools/gguf_tokenizer_fixtures/requirements.txt)")


check_pins()

import gguf  # noqa: E402  (after the version check)
import transformers  # noqa: E402
from gguf import TokenType  # noqa: E402

transformers.logging.set_verbosity_error()

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = os.path.join(ROOT, "fixtures", "tokenizers")
MOBY_IDS = 2000  # ids of Moby Dick recorded in full; the rest by count and sha256

# name: (HF tokenizer folder, general.architecture, general.name, tokenizer.ggml.model, tokenizer.ggml.pre,
#        write merges for a sentencepiece vocabulary)
FIXTURES = {
    "gpt2": ("gpt2", "gpt2", "gpt2-fixture", "gpt2", "gpt-2", False),
    "llama3": ("llama3", "llama", "llama3-fixture", "gpt2", "llama-bpe", False),
    "qwen2": ("qwen2", "qwen2", "qwen2-fixture", "gpt2", "qwen2", False),
    "smollm": ("digits", "llama", "smollm-fixture", "gpt2", "smollm", False),
    "llama2": ("llama2", "llama", "llama2-fixture", "llama", "default", False),
    "mistral": ("mistral", "llama", "mistral-fixture", "llama", "default", True),
    "gemma": ("gemma", "gemma2", "gemma-fixture", "llama", "default", False),
}


def looks_special(token):
    """convert_hf_to_gguf.py's does_token_look_special."""
    return (token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (token.startswith("<|") and token.endswith("|>"))
            or (token.startswith("<unused") and token.endswith(">")))


def hf_vocab(folder):
    """(tokens by id, token types by id, tokenizer.json, tokenizer_config.json) as convert_hf_to_gguf.py's
    get_vocab_base (byte-level BPE) or LlamaHfVocab (sentencepiece BPE) list them."""
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    by_id = {i: (t, TokenType.NORMAL) for t, i in doc["model"]["vocab"].items()}
    for a in doc["added_tokens"]:
        if a["special"] or looks_special(a["content"]):
            by_id[a["id"]] = (a["content"], TokenType.CONTROL)
        else:
            by_id[a["id"]] = (a["content"].replace("\u2581", " "), TokenType.USER_DEFINED)
    for i, (t, kind) in by_id.items():
        if kind == TokenType.NORMAL and re.fullmatch(r"<0x[0-9A-F]{2}>", t) and doc["model"].get("byte_fallback"):
            by_id[i] = (t, TokenType.BYTE)
    n = max(by_id) + 1
    tokens = [by_id.get(i, (f"[PAD{i}]", TokenType.UNUSED)) for i in range(n)]
    return [t for t, _ in tokens], [int(k) for _, k in tokens], doc, config


def token_id(tokens, config, key):
    v = config.get(key)
    v = v.get("content") if isinstance(v, dict) else v
    return tokens.index(v) if v in tokens else None


def write_fixture(path, name, spec):
    folder, arch, gname, model, pre, sp_merges = spec
    tokens, types, doc, config = hf_vocab(os.path.join(SOURCES, folder))
    w = gguf.GGUFWriter(path, arch)
    w.add_name(gname)
    w.add_block_count(1)
    w.add_context_length(256)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_tokenizer_model(model)
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if model == "llama":  # sentencepiece scores: -id for normal pieces (merge order), 0 for the rest
        w.add_token_scores([float(-i) if k == TokenType.NORMAL else 0.0 for i, k in enumerate(types)])
    if model == "gpt2" or sp_merges:
        w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]])
    for key, add in (("bos_token", w.add_bos_token_id), ("eos_token", w.add_eos_token_id),
                     ("unk_token", w.add_unk_token_id), ("pad_token", w.add_pad_token_id)):
        i = token_id(tokens, config, key)
        if i is not None:
            add(i)
    for key, add in (("add_bos_token", w.add_add_bos_token), ("add_eos_token", w.add_add_eos_token)):
        if isinstance(config.get(key), bool):
            add(config[key])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def ids_sha256(ids):
    return hashlib.sha256(b"".join(struct.pack("<i", i) for i in ids)).hexdigest()


def expected(tok, moby):
    """What transformers' tokenizer computes: the stress texts both ways, their decoding, Moby Dick."""
    stress, specials = (read(os.path.join(SOURCES, f)) for f in ("stress.txt", "stress_specials.txt"))
    out = {"bos": tok.bos_token_id, "eos": tok.eos_token_id}
    for key, text in (("stress", stress), ("specials", specials)):
        out[key] = {"ids": tok.encode(text, add_special_tokens=False), "ids_special": tok.encode(text)}
    out["stress"]["decoded"] = tok.decode(out["stress"]["ids"])
    if moby is not None:
        plain, special = tok.encode(moby, add_special_tokens=False), tok.encode(moby)
        out["mobydick"] = {"count": len(plain), "sha256": ids_sha256(plain), "count_special": len(special),
                           "sha256_special": ids_sha256(special), "first_ids": plain[:MOBY_IDS]}
    return out


def generate(out, data):
    moby = read(data) if data and os.path.exists(data) else None
    manifest = {"generator": "tools/gguf_tokenizer_fixtures/generate.py",
                "versions": {"python": sys.version.split()[0], **{p: importlib.metadata.version(p) for p in PINS}},
                "mobydick_sha256": hashlib.sha256(moby.encode("utf-8")).hexdigest() if moby else None,
                "fixtures": {}}
    for name, spec in FIXTURES.items():
        write_fixture(os.path.join(out, name + ".gguf"), name, spec)
        tok = transformers.AutoTokenizer.from_pretrained(out, gguf_file=name + ".gguf")
        folder, arch, gname, model, pre, sp_merges = spec
        manifest["fixtures"][name] = {"source": "fixtures/tokenizers/" + folder, "architecture": arch, "model": model,
                                      "pre": pre, "class": type(tok).__name__, **expected(tok, moby)}
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="fixtures/gguf_tokenizers")
    parser.add_argument("--data", default="../shared/data/mobydick.txt")
    args = parser.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"generate.py: {args.data} is absent (Moby Dick's ids are part of the fixtures)")
    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    generate(tmp, args.data)
    if os.path.isdir(args.out):
        if not os.path.exists(os.path.join(args.out, "expected.json")):
            sys.exit(f"generate.py: {args.out} exists and holds no expected.json; not replacing it")
        shutil.rmtree(args.out)
    os.rename(tmp, args.out)
    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"{args.out}: {len(os.listdir(args.out))} files, {total} bytes")


if __name__ == "__main__":
    main()
