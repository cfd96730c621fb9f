#!/bin/sh
# A full `spanprobe analyze` of a `pre` model (d_model 256, 12 layers, 8 heads, d_ff 1024,
# max_seq_len 256) on 16,384 evaluation tokens, stage by stage, next to the same computations in
# PyTorch CPU (bench/analyze_torch.py), same run, same machine, same thread count: PyPI's PyTorch
# (TORCH_VERSION, installed on first use into a virtual environment, BENCH_VENV, with numpy) and
# Debian's python3-torch (1.13) as a second column. Prints the stage tables side by side, the ratios
# of the totals, and each side's peak memory (maximum RSS).
# Usage (from the repository root): [BUILD=dir] [ROUNDS=n] [TORCH_VERSION=v] [BENCH_VENV=dir]
#        bench/run_analyze_bench.sh [THREADS]
# ROUNDS > 1 alternates the sides n times (a shared machine is noisy).
#
# Both sides do the same work: the Jacobian analysis runs on one sequence of JAC_SEQ tokens with
# exactly POWER_ITERS products per iteration run (spanprobe's stop tolerance is set so low that it
# never stops early), the top-TOPK values, JAC_TOKENS token-local Jacobians; gradient norms on 1
# batch of 8 sequences, pruning on 2. Evaluation tokens: the validation tenth of data/mobydick.txt
# when present (else ../shared/data/mobydick.txt), as byte ids, for both sides.
set -eu
threads=${1:-2}
build=${BUILD:-build}
rounds=${ROUNDS:-1}
JAC_SEQ=${JAC_SEQ:-64} JAC_TOKENS=${JAC_TOKENS:-4} POWER_ITERS=${POWER_ITERS:-20} TOPK=${TOPK:-8}
make -s BUILD="$build" >/dev/null
py=/usr/bin/python3
if ! $py -c 'import torch' 2>/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-torch >/dev/null
fi
# the current PyTorch from PyPI (about 3 GB with its CUDA libraries; the benchmark runs it on the CPU)
TORCH_VERSION=${TORCH_VERSION:-2.15.0}
venv=${BENCH_VENV:-.venv-bench}
if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
    $py -m venv "$venv"
    "$venv/bin/pip" install -q "torch==$TORCH_VERSION" numpy >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
text=data/mobydick.txt
[ -s "$text" ] || text=../shared/data/mobydick.txt
[ -s "$text" ] || tools/fetch_data.sh >/dev/null
[ -s "$text" ] || text=data/mobydick.txt
# the same tokens for both sides: the text's last tenth as byte ids (spanprobe's validation split)
$py - "$text" "$work/tokens.txt" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "w").write(" ".join(str(b) for b in data[len(data) - len(data) // 10:]))
PY
"$build"/spanprobe init --variant pre --n-layers 12 --d-model 256 --n-heads 8 --d-ff 1024 --max-seq-len 256 \
    --out "$work/pre.h5" >/dev/null
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
echo "model: pre, d_model 256, 12 layers, 8 heads, d_ff 1024, vocab 256; 16384 tokens (64 x 256), batch 8; $threads threads"
echo "jacobian: $JAC_SEQ tokens, $POWER_ITERS products per run, top-$TOPK, $JAC_TOKENS token-local positions"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
i=0 pairs=""
while [ "$i" -lt "$rounds" ]; do
    "$build"/spanprobe analyze "$work/pre.h5" --tokens "$work/tokens.txt" --out "$work/report.h5" --device cpu \
        --n-tokens 16384 --seq-len 256 --batch 8 --grad-batches 1 --prune-batches 2 --jac-seq "$JAC_SEQ" \
        --jac-tokens "$JAC_TOKENS" --power-iters "$POWER_ITERS" --power-tol 1e-15 --topk "$TOPK" \
        >"$work/ours.$i.txt" 2>"$work/ours.$i.err" || { cat "$work/ours.$i.err" >&2; exit 1; }
    for side in pypi debian; do
        side_py=$py
        [ "$side" = debian ] || side_py=$venv/bin/python
        "$side_py" bench/analyze_torch.py --threads "$threads" --tokens "$work/tokens.txt" --jac-seq "$JAC_SEQ" \
            --jac-tokens "$JAC_TOKENS" --power-iters "$POWER_ITERS" --topk "$TOPK" >"$work/theirs.$i.$side.json"
    done
    pairs="$pairs $work/ours.$i.txt $work/theirs.$i.pypi.json $work/theirs.$i.debian.json"
    i=$((i + 1))
done
# shellcheck disable=SC2086 # the pairs are separate arguments
$py bench/stage_table.py $pairs
