#!/bin/sh
# Hugging Face model directories (docs/benchmarks.md, "Hugging Face models"), in one run:
#  1. open cost: bench_hf_open (bench/bench_hf_open.c) on a random GPT-2 small (124M parameters) in
#     F32 and in BF16, and on the random Llama when present: sp_hf_load on the CPU backend next to
#     reading the files' bytes once, best of OPEN_ROUNDS rounds; the issue's target is <= 1.5x.
#  2. memory of `spanprobe analyze` on the BF16 model against float32 weights + activations + 10%
#     (the issue's budget): a forward pass alone (--metrics growth, one batch), every streaming
#     analyzer together (one batch of tokens: the peak does not grow with tokens), the analyzers
#     that hold the parameter gradients (grad_norms, pruning; one batch each), and the full analysis
#     of part 3. MEMORY_ONLY=1 stops after this part.
#  3. a full `spanprobe analyze` of the BF16 model on 16,384 tokens (64 x 256, batch 8), stage by
#     stage, next to the same computations in transformers + PyTorch (bench/analyze_hf_torch.py),
#     same tokens, same thread count; ROUNDS > 1 alternates the two sides.
# The models come from bench/make_hf_model.py (into OUT, default bench_out/, kept between runs).
# The random model has no tokenizer: the tokens are the validation tenth of data/mobydick.txt (else
# ../shared/data/mobydick.txt), two bytes a token, id = (256 b0 + b1) mod 50257 (1,229 distinct ids).
# The Jacobian work is matched as in bench/run_analyze_bench.sh: JAC_SEQ tokens, exactly POWER_ITERS
# products per iteration run, top-TOPK, JAC_TOKENS token-local Jacobians; gradient norms on 1 batch
# of 8 sequences, pruning on 2.
# Usage (from the repository root):
#   [BUILD=dir] [ROUNDS=n] [OUT=dir] [PYTHON=python] [MEMORY_ONLY=1] bench/run_hf_analyze_bench.sh [THREADS]
# PYTHON needs torch, transformers and safetensors (default .venv-ref/bin/python, else python3).
set -eu
threads=${1:-2}
build=${BUILD:-build}
rounds=${ROUNDS:-1}
out=${OUT:-bench_out}
OPEN_ROUNDS=${OPEN_ROUNDS:-5}
JAC_SEQ=${JAC_SEQ:-64} JAC_TOKENS=${JAC_TOKENS:-4} POWER_ITERS=${POWER_ITERS:-20} TOPK=${TOPK:-8}
py=${PYTHON:-.venv-ref/bin/python}
[ -x "$py" ] || py=python3
if ! "$py" -c 'import torch, transformers, safetensors' 2>/dev/null; then
    echo "run_hf_analyze_bench.sh: $py lacks torch, transformers or safetensors (set PYTHON)" >&2
    exit 1
fi
make -s BUILD="$build" "$build/spanprobe" "$build/bench/bench_hf_open" >/dev/null
"$py" bench/make_hf_model.py --out "$out" >/dev/null 2>&1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
text=data/mobydick.txt
[ -s "$text" ] || text=../shared/data/mobydick.txt
"$py" - "$text" "$work/tokens.txt" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
val = data[len(data) - len(data) // 10:]
ids = [(256 * val[i] + val[i + 1]) % 50257 for i in range(0, len(val) - 1, 2)]
open(sys.argv[2], "w").write(" ".join(map(str, ids)))
PY
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
model="$out/gpt2-bf16"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
    "$(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg); $("$py" -c \
    'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"

echo "== 1. open cost (best of $OPEN_ROUNDS; cpu: the process's CPU time, which a busy machine does not inflate)"
for dir in "$out/gpt2-f32" "$out/gpt2-bf16" "$out/llama-bf16"; do
    [ -d "$dir" ] || continue
    "$build/bench/bench_hf_open" "$dir" --rounds "$OPEN_ROUNDS" | grep -v -e '^round' -e '^{'
done

analyze() { # the analysis options both memory runs and the comparison share
    "$build/spanprobe" analyze "$model" --tokens "$work/tokens.txt" --device cpu --seq-len 256 --batch 8 "$@"
}
echo "== 2. peak memory of analyze on $model"
analyze --metrics growth --n-tokens 2048 --out "$work/growth.h5" >"$work/growth.txt" 2>/dev/null
analyze --metrics similarity,cka,growth,hidden_spectra,ffn_spectra --n-tokens 2048 --out "$work/stream.h5" \
    >"$work/stream.txt" 2>/dev/null
analyze --metrics grad_norms,pruning --n-tokens 2048 --grad-batches 1 --prune-batches 1 --out "$work/grads.h5" \
    >"$work/grads.txt" 2>/dev/null
memory() { # the peak RSS of each run listed against the budget
    WORK="$work" "$py" - "$@" <<'PY'
import os, sys
sys.path.insert(0, "bench")
from stage_table import spanprobe_run
work = os.environ["WORK"]
g = spanprobe_run(f"{work}/growth.txt")
budget = 1.1 * (g["weights_mib"] + g["activations_mib"])
what = {"growth": "forward pass (--metrics growth)", "stream": "streaming analyzers, one batch of tokens",
        "grads": "gradient analyzers (grad_norms, pruning), one batch each", "ours.0": "full analysis (part 3)"}
for name in sys.argv[1:]:
    run = spanprobe_run(f"{work}/{name}.txt")
    print(f"{what[name]}: peak RSS {run['peak_rss_mib']:.0f} MiB; budget 1.1 x (float32 weights "
          f"{g['weights_mib']:.0f} + activations {g['activations_mib']:.0f}) = {budget:.0f} MiB: "
          f"{run['peak_rss_mib'] / budget:.2f} of it")
PY
}
memory growth stream grads
[ "${MEMORY_ONLY:-0}" = 1 ] && exit 0
i=0 pairs=""
while [ "$i" -lt "$rounds" ]; do
    analyze --out "$work/report.h5" --n-tokens 16384 --grad-batches 1 --prune-batches 2 --jac-seq "$JAC_SEQ" \
        --jac-tokens "$JAC_TOKENS" --power-iters "$POWER_ITERS" --power-tol 1e-15 --topk "$TOPK" \
        >"$work/ours.$i.txt" 2>"$work/ours.$i.err" || { cat "$work/ours.$i.err" >&2; exit 1; }
    "$py" bench/analyze_hf_torch.py --model "$model" --threads "$threads" --tokens "$work/tokens.txt" \
        --jac-seq "$JAC_SEQ" --jac-tokens "$JAC_TOKENS" --power-iters "$POWER_ITERS" --topk "$TOPK" \
        >"$work/theirs.$i.json" 2>"$work/theirs.$i.err" || { cat "$work/theirs.$i.err" >&2; exit 1; }
    pairs="$pairs $work/ours.$i.txt $work/theirs.$i.json"
    i=$((i + 1))
done
memory ours.0
echo "== 3. full analyze: jacobian $JAC_SEQ tokens, $POWER_ITERS products per run, top-$TOPK," \
    "$JAC_TOKENS token-local positions; $threads threads"
# shellcheck disable=SC2086 # the pairs are separate arguments
"$py" bench/stage_table.py $pairs
"$py" -c 'import json, sys; print("transformers from_pretrained of the model: %.2f s" % json.load(open(sys.argv[1]))["load_s"])' \
    "$work/theirs.0.json"
