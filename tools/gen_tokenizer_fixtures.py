#!/usr/bin/env python3
"""Generates the Hugging Face tokenizer fixtures of tests/test_hf_tokenizer.c with the reference
implementation, the `tokenizers` library (pinned: 0.23.3).

Real tokenizer.json files cannot be downloaded here, so small tokenizers are TRAINED with the
library on part of Moby Dick plus a Unicode sample, then given exactly the normalizer,
pre-tokenizer, post-processor, decoder and model flags of the real models they stand for (GPT-2,
Llama 3, Qwen2, Llama 2, Gemma, Mistral, older Metaspace conversions; a Digits variant). Each goes into
fixtures/tokenizers/<name>/ as tokenizer.json + tokenizer_config.json, with expected.json holding
what the library itself computes from those committed files: the ids of the whole of mobydick.txt
(count, sha256 of the ids as int32 little-endian, the first 2000 ids), the full ids of the stress
texts (fixtures/tokenizers/stress*.txt), with and without the special tokens the tokenizer adds, and
decode(encode(text)).

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers==0.23.3
    /tmp/tokvenv/bin/python tools/gen_tokenizer_fixtures.py [--data ../shared/data/mobydick.txt]

Deterministic: the same inputs give byte-identical files (training is single-threaded).
"""
import argparse
import hashlib
import json
import os
import platform
import struct
import sys

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before the import: training order is then fixed

import tokenizers  # noqa: E402
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,  # noqa: E402
                        pre_tokenizers, processors, trainers)

TOKENIZERS_VERSION = "0.23.3"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fixtures", "tokenizers")

# The split patterns of the real tokenizer.json files (Llama 3 = tiktoken's cl100k; Qwen2 the same
# with single digits).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Text the tokenizers must agree on beyond English prose: scripts, emoji sequences, combining marks
# (decomposed and precomposed, for NFC), every kind of whitespace run, digit runs, contractions in
# both cases, and the characters where regex engines' Unicode tables differ (U+180E, long s, Kelvin).
STRESS = "".join([
    "Hello, world! It's a test: don't, won't, they're, we've, I'm, you'll, he'd.\n",
    "UPPER CASE: IT'S, DON'T, THEY'RE, WE'VE, I'M, YOU'LL, HE'D; mixed 'S 'T 'Re 'vE; long s: it\u017fs; "
    "Kelvin: 'K \u212a\n",
    "Digits: 1234567 89 0 3.14159 1,000,000 2024-01-02 \u0663\u0664\u0665 \u00bd \u216b x\u00b2 \uff11\uff12\n",
    "Spaces:  two   three    four\tTab\t\ttabs \t mixed  \n  leading and trailing   \n",
    "Newlines\n\n\nthree\r\nCRLF\r\n\r\nend\rCR alone\u2028LS\u2029PS\u0085NEL\n",
    "Odd spaces: a\u00a0b c\u3000d e\u2009f g\u180eh i\u200bj k\u202fl m\u205fn \ufeffBOM\n",
    "CJK: \u4e2d\u6587\u5206\u8bcd\u6d4b\u8bd5\u3002\u65e5\u672c\u8a9e\u306e\u3072\u3089\u304c\u306a\u3068"
    "\u30ab\u30bf\u30ab\u30ca\u3002\ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8.\n",
    "Emoji: \U0001f600 \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 "
    "\U0001f1eb\U0001f1f7 \u2764\ufe0f \U0001f3f3\ufe0f\u200d\U0001f308 \U0001f9d1\U0001f3ff\u200d\U0001f4bb\n",
    "Combining: cafe\u0301 caf\u00e9 n\u0303 \u00f1 A\u030a \u00c5 e\u0301\u0301 \u1e9b\u0323 "
    "\u0915\u094d\u0937 \u0e01\u0e34\n",
    "Arabic: \u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 123 "
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629.\n",
    "Devanagari: \u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e, "
    "\u0939\u093f\u0928\u094d\u0926\u0940\u0964\n",
    "Greek \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac, Cyrillic \u0420\u0443\u0441\u0441\u043a\u0438\u0439, "
    "Hebrew \u05e2\u05d1\u05e8\u05d9\u05ea, Thai \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22.\n",
    "Symbols: <<>> [x] {y} (z) @#$%^&*_+=|\\/~` \u00a7\u00b6\u2020 \u20ac\u00a3\u00a5 \u2192\u21d2 "
    "\u2200x\u2203y \u2014 \u2013 \u2026 \u201cquoted\u201d \u2018single\u2019\n",
    "Controls: a\x01b\x7fc\x1bd\n",
    "Long: " + "a" * 300 + " " + "ab" * 150 + " " + "\u00e9" * 100 + "\n",
    "Spaces run:" + " " * 40 + "x" + "\t" * 10 + "y\n",
    "Ahab Ahab's Ahabs captain-Ahab AHAB _Ahab_ whale whales Whale.\n",
])

# The special and added tokens of every fixture inside text, at the start, between words, glued to
# words, with spaces around (lstrip/rstrip), partial and nested.
SPECIALS = "".join([
    "<|begin_of_text|>Chat <|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<s>[INST] Tell me [INST]more[/INST] </s><s> again</s>\n",
    "<bos><start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n<eos>\n",
    "end<|endoftext|>start <|endoftext|> spaced <|sep|>  between   <|sep|>x<|sep|>\n",
    "partial <|endoftext| and <|endof <<s>> <s<s>> </s</s> <|im_start|<|im_end|>\n",
    "words: Ahab, [[note]] and[[note]]glued, <unk> <pad> <mask>\n",
])

UNICODE_SAMPLE = STRESS * 3


def read_text(path):
    # tokenizers takes str: the book is UTF-8 with a BOM and CRLF lines, kept as they are
    with open(path, "rb") as f:
        data = f.read()
    return data, data.decode("utf-8")


def train(model, normalizer, pre_tokenizer, vocab_size, texts, special, alphabet=None):
    tok = Tokenizer(model)
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    kwargs = dict(vocab_size=vocab_size, min_frequency=2, special_tokens=special, show_progress=False)
    if alphabet is not None:
        kwargs["initial_alphabet"] = alphabet
    tok.train_from_iterator(texts, trainers.BpeTrainer(**kwargs))
    return json.loads(tok.to_str())


def added(token_id, content, special=True, normalized=None, lstrip=False, rstrip=False, single_word=False):
    return {"id": token_id, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": (not special) if normalized is None else normalized, "special": special}


def component(obj):
    """A tokenizers component as the JSON dict tokenizer.json holds."""
    holder = Tokenizer(models.BPE())
    if isinstance(obj, normalizers.Normalizer):
        holder.normalizer = obj
        key = "normalizer"
    elif isinstance(obj, pre_tokenizers.PreTokenizer):
        holder.pre_tokenizer = obj
        key = "pre_tokenizer"
    elif isinstance(obj, decoders.Decoder):
        holder.decoder = obj
        key = "decoder"
    else:
        holder.post_processor = obj
        key = "post_processor"
    return json.loads(holder.to_str())[key]


def legacy_merges(doc):
    """Merges in the older "a b" string form (GPT-2 and Llama 2 era files)."""
    doc["model"]["merges"] = [" ".join(pair) for pair in doc["model"]["merges"]]


def template(bos, bos_id):
    return processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B:1",
                                         special_tokens=[(bos, bos_id)])


def vocab_tail(doc):
    return max(doc["model"]["vocab"].values()) + 1


def build_fixtures(train_texts):
    fx = {}

    # (a) GPT-2: ByteLevel with GPT-2's regex, <|endoftext|> in the vocab; plus a special token that
    # strips spaces on both sides and a non-special single-word token matched after normalization.
    d = train(models.BPE(), None, pre_tokenizers.ByteLevel(add_prefix_space=False), 1000, train_texts,
              ["<|endoftext|>"], alphabet=pre_tokenizers.ByteLevel.alphabet())
    n = vocab_tail(d)
    d["added_tokens"] = [added(0, "<|endoftext|>"), added(n, "<|sep|>", lstrip=True, rstrip=True),
                         added(n + 1, "Ahab", special=False, single_word=True)]
    d["pre_tokenizer"] = component(pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                            use_regex=True))
    d["post_processor"] = component(processors.ByteLevel(trim_offsets=True))
    d["decoder"] = component(decoders.ByteLevel())
    legacy_merges(d)
    fx["gpt2"] = (d, {"add_bos_token": False, "add_prefix_space": False, "bos_token": "<|endoftext|>",
                      "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "model_max_length": 1024,
                      "tokenizer_class": "GPT2Tokenizer"})
    gpt2_doc = d

    # (g) the GPT-2 vocabulary behind Digits (one pre-token per digit) and ByteLevel with a prefix space.
    d = json.loads(json.dumps(gpt2_doc))
    d["added_tokens"] = d["added_tokens"][:1]
    d["pre_tokenizer"] = component(pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)]))
    fx["digits"] = (d, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                        "tokenizer_class": "GPT2Tokenizer"})

    # (b) Llama 3: Split with the cl100k regex + ByteLevel without regex, ignore_merges; the special
    # tokens come after the model vocabulary (not in it), BOS from the post-processor template.
    d = train(models.BPE(ignore_merges=True), None, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]), 1500, train_texts,
        [], alphabet=pre_tokenizers.ByteLevel.alphabet())
    n = vocab_tail(d)
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|start_header_id|>",
             "<|end_header_id|>", "<|eot_id|>"]
    d["added_tokens"] = [added(n + i, s) for i, s in enumerate(names)]
    d["model"]["ignore_merges"] = True
    d["post_processor"] = component(processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        template("<|begin_of_text|>", n)]))
    d["decoder"] = component(decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True))
    fx["llama3"] = (d, {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                        "clean_up_tokenization_spaces": True, "model_max_length": 131072,
                        "tokenizer_class": "PreTrainedTokenizerFast",
                        "added_tokens_decoder": {str(n): {"content": "<|begin_of_text|>", "special": True}}})

    # (c) Qwen2: NFC, Split with single digits + ByteLevel, empty-string subword affixes, no BOS.
    d = train(models.BPE(), normalizers.NFC(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), "isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]), 1500, train_texts,
        [], alphabet=pre_tokenizers.ByteLevel.alphabet())
    n = vocab_tail(d)
    d["added_tokens"] = [added(n, "<|endoftext|>"), added(n + 1, "<|im_start|>"), added(n + 2, "<|im_end|>")]
    d["model"]["continuing_subword_prefix"] = ""
    d["model"]["end_of_word_suffix"] = ""
    d["post_processor"] = component(processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                                         use_regex=False))
    d["decoder"] = component(decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False))
    fx["qwen2"] = (d, {"add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>",
                       "pad_token": "<|endoftext|>", "errors": "replace", "split_special_tokens": False,
                       "model_max_length": 131072, "tokenizer_class": "Qwen2Tokenizer"})

    # (d) Llama 2 (legacy SentencePiece conversion): <unk> <s> </s>, the 256 <0xXX> byte pieces,
    # then the merges; Prepend + Replace normalizer, no pre-tokenizer, byte fallback and fused unk.
    sp_norm = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    d = sentencepiece_bpe(train_texts, sp_norm, ["<unk>", "<s>", "</s>"], 1200)
    d["added_tokens"].append(added(len(d["model"]["vocab"]), "[INST]", special=False))
    d["normalizer"] = component(sp_norm)
    d["post_processor"] = component(template("<s>", 1))
    d["decoder"] = component(decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                                decoders.Fuse(), decoders.Strip(" ", 1, 0)]))
    legacy_merges(d)
    sp_config = {"add_bos_token": True, "add_eos_token": False, "legacy": True, "pad_token": None,
                 "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False,
                               "rstrip": False, "single_word": False},
                 "eos_token": {"__type": "AddedToken", "content": "</s>", "lstrip": False, "normalized": False,
                               "rstrip": False, "single_word": False},
                 "unk_token": {"__type": "AddedToken", "content": "<unk>", "lstrip": False, "normalized": False,
                               "rstrip": False, "single_word": False},
                 "clean_up_tokenization_spaces": False, "model_max_length": 4096, "tokenizer_class": "LlamaTokenizer"}
    fx["llama2"] = (d, sp_config)
    llama2_doc = d

    # (f) Mistral / non-legacy Llama: the same vocabulary, no normalizer, Metaspace(prepend first).
    d = json.loads(json.dumps(llama2_doc))
    d["added_tokens"] = d["added_tokens"][:3]
    d["normalizer"] = None
    d["pre_tokenizer"] = component(pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                            split=False))
    d["model"]["merges"] = [m.split(" ") for m in d["model"]["merges"]]
    fx["mistral"] = (d, dict(sp_config, legacy=False))

    # (h) the older SentencePiece conversion (tokenizers < 0.14): Metaspace pre-tokenizer and decoder
    # (prepend always, split), and here without byte fallback: unknown characters become one fused <unk>.
    d = json.loads(json.dumps(llama2_doc))
    d["added_tokens"] = d["added_tokens"][:3]
    d["normalizer"] = None
    d["pre_tokenizer"] = component(pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                            split=True))
    d["decoder"] = component(decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True))
    d["model"]["byte_fallback"] = False
    fx["metaspace_unk"] = (d, dict(sp_config, legacy=False))

    # (e) Gemma: <pad> <eos> <bos> <unk> first, Replace normalizer only (no prefix), a no-op Split on
    # " ", turn markers, byte fallback; no Strip in the decoder.
    g_norm = normalizers.Replace(" ", "\u2581")
    d = sentencepiece_bpe(train_texts, g_norm, ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
                                                "<start_of_turn>", "<end_of_turn>"], 1000)
    d["model"]["unk_token"] = "<unk>"
    d["normalizer"] = component(g_norm)
    d["pre_tokenizer"] = component(pre_tokenizers.Split(" ", "merged_with_previous"))
    d["post_processor"] = component(template("<bos>", 2))
    d["decoder"] = component(decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                                decoders.Fuse()]))
    fx["gemma"] = (d, {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
                       "pad_token": "<pad>", "unk_token": "<unk>", "spaces_between_special_tokens": False,
                       "tokenizer_class": "GemmaTokenizer"})
    return fx


def sentencepiece_bpe(train_texts, normalizer, specials, n_merged):
    """A SentencePiece-style BPE vocabulary: the specials, the 256 byte pieces, then the trained
    pieces less the non-ASCII characters no merge uses, so those take the byte fallback. (The
    trainer's own limit_alphabet breaks ties between equally rare characters at random.) Trained on
    words split before each ▁, as SentencePiece splits by whitespace: ▁ only starts pieces."""
    d = train(models.BPE(), normalizer, pre_tokenizers.Metaspace(prepend_scheme="never", split=True), n_merged,
              train_texts, [])
    in_merges = {part for pair in d["model"]["merges"] for part in pair}
    in_merges |= {"".join(pair) for pair in d["model"]["merges"]}
    vocab = {s: i for i, s in enumerate(specials)}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for piece, _ in sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1]):
        if len(piece) == 1 and ord(piece) > 0x7F and piece not in in_merges:
            continue
        vocab.setdefault(piece, len(vocab))
    d["model"].update(vocab=vocab, unk_token=specials[0] if specials[0] == "<unk>" else None,
                      byte_fallback=True, fuse_unk=True)
    d["added_tokens"] = [added(i, s) for i, s in enumerate(specials)]
    d["pre_tokenizer"] = None
    return d


def ids_le(ids):
    return struct.pack("<%di" % len(ids), *ids)


def expectations(tok, book, stress, specials):
    book_ids = tok.encode(book, add_special_tokens=False).ids
    book_bos = tok.encode(book, add_special_tokens=True).ids
    stress_ids = tok.encode(stress, add_special_tokens=False).ids
    return {
        "mobydick": {"count": len(book_ids), "sha256": hashlib.sha256(ids_le(book_ids)).hexdigest(),
                     "count_special": len(book_bos), "sha256_special": hashlib.sha256(ids_le(book_bos)).hexdigest(),
                     "first_ids": book_ids[:2000]},
        "stress": {"ids": stress_ids, "ids_special": tok.encode(stress, add_special_tokens=True).ids,
                   "decoded": tok.decode(stress_ids, skip_special_tokens=False)},
        "specials": {"ids": tok.encode(specials, add_special_tokens=False).ids,
                     "ids_special": tok.encode(specials, add_special_tokens=True).ids},
    }


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "mobydick.txt"))
    args = ap.parse_args()
    if tokenizers.__version__ != TOKENIZERS_VERSION:
        sys.exit(f"tokenizers {tokenizers.__version__} found, the fixtures are made with {TOKENIZERS_VERSION}")
    book_bytes, book = read_text(args.data)
    train_texts = book[:300000].splitlines() + UNICODE_SAMPLE.splitlines()
    os.makedirs(OUT, exist_ok=True)
    write(os.path.join(OUT, "stress.txt"), STRESS)
    write(os.path.join(OUT, "stress_specials.txt"), SPECIALS)
    versions = {"tokenizers": tokenizers.__version__, "python": platform.python_version(),
                "mobydick_sha256": hashlib.sha256(book_bytes).hexdigest()}
    for name, (doc, config) in build_fixtures(train_texts).items():
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        write(os.path.join(d, "tokenizer.json"), json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
        write(os.path.join(d, "tokenizer_config.json"), json.dumps(config, ensure_ascii=False, indent=2) + "\n")
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # expectations from the committed file
        exp = dict(generator=versions, **expectations(tok, book, STRESS, SPECIALS))
        write(os.path.join(d, "expected.json"), json.dumps(exp, ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"{name}: vocab {tok.get_vocab_size()}, mobydick {exp['mobydick']['count']} ids")


if __name__ == "__main__":
    main()
