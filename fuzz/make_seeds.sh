#!/bin/sh
# fuzz/make_seeds.sh SPANPROBE OUT: writes the seed corpus of every fuzz harness into OUT/<harness>/
# (fuzz/corpus/ was made by `fuzz/make_seeds.sh build/spanprobe fuzz/corpus`; run it again after a
# format change). The HDF5 seeds come from the tool itself, on a micro model (1 or 2 blocks,
# d_model 8) trained 4 steps on a few lines of text: fresh checkpoints of two variants, a trained
# one (AdamW state, /train), one imported from llama2.c (a vocab tokenizer), dumps with and without
# the optional arrays, reports with their summaries (joined as fuzz_report.c reads them), a
# training log; for the `_tree` harnesses, each of them described as records. llama2.c files are
# written here (the layout of io/llama2c.h); the JSON, safetensors and GGUF seeds are small
# fixtures (fixtures/) and hand-written files.
set -eu
bin=$1
out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for h in checkpoint config dump gguf gguf_model hf_config hf_tokenizer llama2c report rules safetensors \
    token_file tokenizer trainlog; do
    mkdir -p "$out/$h"
done
awk 'BEGIN { for (i = 0; i < 40; i++) print "Call me Ishmael. Some years ago, never mind how long precisely." }' \
    >"$work/text.txt"
micro="--n-layers 1 --d-model 8 --n-heads 2 --n-kv-heads 1 --d-ff 8 --max-seq-len 8"
# shellcheck disable=SC2086
"$bin" init $micro --variant span --seed 1 --out "$out/checkpoint/init-span.h5" >/dev/null
# shellcheck disable=SC2086
"$bin" init $micro --n-layers 2 --variant siamese --pos rope --norm rmsnorm --ffn swiglu --seed 2 \
    --out "$out/checkpoint/init-siamese-rope.h5" >/dev/null
# shellcheck disable=SC2086
"$bin" train $micro --variant pre --data "$work/text.txt" --batch-size 2 --steps 4 --warmup-steps 1 \
    --log-every 1 --eval-every 2 --eval-windows 2 --ckpt-every 4 --device cpu --out "$work/run" >/dev/null 2>&1
cp "$work/run/ckpt_00000004.h5" "$out/checkpoint/trained-pre.h5"
cp "$work/run/trainlog.h5" "$out/trainlog/trainlog.h5"
"$bin" dump "$out/checkpoint/init-span.h5" --text "$work/text.txt" --seq 8 --batch-limit 2 --logits \
    --out "$out/dump/span-logits.h5" >/dev/null
"$bin" dump "$out/checkpoint/init-siamese-rope.h5" --text "$work/text.txt" --seq 8 --batch-limit 2 \
    --out "$out/dump/siamese.h5" >/dev/null
# a report of every analyzer on the checkpoint and one of the dump (activation-only analyzers, the
# others skipped); each joined with its summary: 4-byte little-endian length, report, summary
"$bin" analyze "$out/checkpoint/trained-pre.h5" --data "$work/text.txt" --n-tokens 64 --seq 8 --device cpu \
    --quiet --out "$work/ckpt-report.h5" >/dev/null 2>&1
"$bin" analyze "$out/dump/siamese.h5" --quiet --device cpu --out "$work/dump-report.h5" >/dev/null 2>&1
join_report() {
    python3 -c 'import os, struct, sys; h5 = open(sys.argv[1], "rb").read(); js = open(sys.argv[2], "rb").read()
sys.stdout.buffer.write(struct.pack("<I", len(h5)) + h5 + js)' "$1" "$2"
}
# the `_tree` harnesses' seeds are the HDF5 seeds described as records (fuzz/h5_tree.h) by a built
# tree harness: $FUZZ_BUILD/fuzz/fuzz_checkpoint_tree (`make fuzz` builds it; any tree harness
# describes any HDF5 file)
describe() { FUZZ_H5_DESCRIBE="$1" "${FUZZ_BUILD:-build-fuzz}/fuzz/fuzz_checkpoint_tree" "$2"; }
mkdir -p "$work/tree" "$out/report_tree"
for r in ckpt-report dump-report; do
    join_report "$work/$r.h5" "$work/$r.json" >"$out/report/$r.bin"
    describe "$work/tree" "$work/$r.h5"
    join_report "$work/tree/$r.h5" "$work/$r.json" >"$out/report_tree/$r.bin"
done
cp fixtures/dump_recipe/llama.h5 "$out/dump/h5py-recipe.h5"

# llama2.c: a model of dim 8 (2 layers, 2 heads, 1 KV head, vocab 16, seq_len 8) tied and untied,
# and tokenizers of 16 pieces (<unk>, BOS, EOS, letters) and of llama2.c's byte pieces; the
# tokenizer harness reads a 2-byte vocab_size first
python3 - "$out" <<'PY'
import struct, sys
out = sys.argv[1]
def model(vocab):
    d, f, L, h, kv, s = 8, 12, 2, 2, 1, 8
    hd = d // h
    v = abs(vocab)
    n = v * d + L * (d + 2 * d * d + 2 * kv * hd * d + d + 3 * f * d) + d + s * hd + (v * d if vocab < 0 else 0)
    values = b"".join(struct.pack("<f", ((i * 37) % 101) * 0.01 - 0.5) for i in range(n))
    return struct.pack("<7i", d, f, L, h, kv, vocab, s) + values
def tokenizer(pieces):
    records = b"".join(struct.pack("<fi", -i, len(p)) + p for i, p in enumerate(pieces))
    return struct.pack("<i", max(len(p) for p in pieces)) + records
small = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [bytes([97 + i]) for i in range(13)]
byte_pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % i for i in range(256)]
byte_pieces += [b" ", b"e", b" t", b"th", b"the", b"\xe2\x96\x81"]
open(out + "/llama2c/tied.bin", "wb").write(model(16))
open(out + "/llama2c/untied.bin", "wb").write(model(-16))
open(out + "/tokenizer/tok16.bin", "wb").write(struct.pack("<H", 16) + tokenizer(small))
open(out + "/tokenizer/bytes.bin", "wb").write(struct.pack("<H", len(byte_pieces)) + tokenizer(byte_pieces))
open(out + "/tokenizer/tok16.model", "wb").write(tokenizer(small))
PY
mv "$out/tokenizer/tok16.model" "$work/tok16.bin"
"$bin" import llama2c "$out/llama2c/tied.bin" "$work/tok16.bin" "$out/checkpoint/llama2c.h5" >/dev/null

printf '1 2 3\n4 5 6\n' >"$out/token_file/lines.txt"
printf '  0\t511 17\r\n42 7 \n9\n' >"$out/token_file/whitespace.txt"
cp fixtures/tiny.json "$out/config/tiny.json"
cat >"$out/config/train.json" <<'JSON'
{"variant": "siamese", "n_layers": 3, "d_model": 16, "n_heads": 4, "n_kv_heads": 2, "pos": "rope",
 "rope_theta": 500000.0, "norm": "rmsnorm", "ffn": "swiglu", "sliding_window": 4, "window_pattern": 2,
 "batch_size": 4, "seq_len": 8, "steps": 10, "lr": 0.001, "warmup_steps": 2, "grad_clip": 0,
 "device": "cpu", "data": "text.txt", "tie_embeddings": false, "final_norm": true}
JSON
cat >"$out/rules/rules.json" <<'JSON'
{"include_defaults": true,
 "rules": [
  {"name": "deep blocks still turn the stream", "description": "min block influence, deepest half",
   "metric": "similarity/block_influence", "reduce": "min", "layers": "deepest_half", "op": ">=", "limit": 0.002},
  {"name": "no blow-up", "metric": "growth/top1_over_median", "reduce": "max", "op": "<", "limit": 1000},
  {"name": "ffn rank", "metric": "ffn_spectra/soft_rank", "reduce": "mean", "layers": [-2, -1], "op": ">",
   "limit": 0.1, "optional": true},
  {"name": "finite", "metric": "cka/cka", "reduce": "max", "op": "finite"},
  {"name": "deep cosine did not rise", "metric": "summary:similarity.adjacent_cosine_deep_half",
   "tolerance": {"absolute": 0.005, "relative": 0, "fail_on": "increase"}}]}
JSON
for d in fixtures/hf/*/; do
    [ -f "$d/config.json" ] && cp "$d/config.json" "$out/hf_config/$(basename "$d").json"
done
for t in gpt2 llama2 digits metaspace_unk; do
    cp "fixtures/tokenizers/$t/tokenizer.json" "$out/hf_tokenizer/$t.json"
done
cp fixtures/safetensors/reference.safetensors "$out/safetensors/"
cp fixtures/hf/gpt_neox-parallel-bf16/model.safetensors "$out/safetensors/gpt_neox-bf16.safetensors"
cp fixtures/hf/qwen3-bf16/model.safetensors "$out/safetensors/qwen3-bf16.safetensors"
for f in meta v2 align64 f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k; do
    cp "fixtures/gguf/$f.gguf" "$out/gguf/"
done
for t in gpt2 llama2 gemma; do cp "fixtures/gguf_tokenizers/$t.gguf" "$out/gguf/"; done
for m in hf-llama-mqa-tied-f32 hf-gpt_neox-parallel-f32; do cp "fixtures/gguf_models/$m.gguf" "$out/gguf_model/"; done
mkdir -p "$out/pt"
for p in state ckpt evil_popen nanogpt nanogpt-nobias-compiled; do cp "fixtures/pt/$p.pt" "$out/pt/"; done
for h in checkpoint dump trainlog; do
    mkdir -p "$out/${h}_tree"
    for f in "$out/$h"/*.h5; do
        describe "$work/tree" "$f"
        mv "$work/tree/$(basename "$f")" "$out/${h}_tree/$(basename "$f" .h5).tree"
    done
done
