#!/bin/sh
# Forward+backward tokens/s of spanprobe's CPU model next to the same model in PyTorch, same run,
# same machine, same thread count (issue: model core performance). Installs Debian's python3-torch
# when it is missing. Usage: [BUILD=dir] [ROUNDS=n] bench/run_model_bench.sh [THREADS]   (from the
# repository root). ROUNDS > 1 alternates the two sides n times (for a shared, noisy machine) and
# ends with the medians of each side and of the per-round ratios.
# BENCH_MODE=train (what bench/run_train_bench.sh sets) times whole training steps instead:
# forward, backward, global-norm clipping and an AdamW update on both sides.
# TORCH_PYTHON=python picks the PyTorch side's interpreter (for example .venv-bench/bin/python, the
# PyPI PyTorch that bench/run_analyze_bench.sh installs); by default python3, else Debian's.
# CONTENTION=1 times each side a second time while one other CPU-bound process (a busy shell loop)
# shares the machine, and prints each side's contended throughput as a share of its quiet one
# (issue 18's targets: spanprobe keeps at least 40%, and at least PyTorch's share). spanprobe runs
# there with OMP_WAIT_POLICY=passive, which its computing commands set for themselves
# (docs/kernels.md); PyTorch runs as its users get it.
set -eu
threads=${1:-2}
train_flag="" what="forward+backward"
if [ "${BENCH_MODE:-}" = train ]; then
    train_flag="--train" what="training step (AdamW, clip 1.0)"
fi
build=${BUILD:-build}   # the build directory to use (make BUILD=...)
make -s BUILD="$build" bench >/dev/null
if ! python3 -c 'import torch' 2>/dev/null && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-torch >/dev/null
fi
py=${TORCH_PYTHON:-python3}
[ -n "${TORCH_PYTHON:-}" ] || python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
echo "model: pre, d_model 256, 8 layers, 8 heads, d_ff 1024, seq 256, batch 8, vocab 256; $threads threads; $what"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(date -u +%Y-%m-%d)"
rounds=${ROUNDS:-1}
results="" contended=""
i=0
while [ "$i" -lt "$rounds" ]; do
    ours=$("$build"/bench/bench_model --steps 5 $train_flag)
    theirs=$($py bench/torch_model.py --threads "$threads" --steps 5 $train_flag)
    echo "$ours"
    echo "$theirs"
    results="$results$ours
$theirs
"
    if [ "${CONTENTION:-0}" = 1 ]; then
        sh -c 'while :; do :; done' &
        busy=$!
        ours=$(OMP_WAIT_POLICY=passive "$build"/bench/bench_model --steps 5 $train_flag)
        theirs=$($py bench/torch_model.py --threads "$threads" --steps 5 $train_flag)
        kill "$busy"
        wait "$busy" 2>/dev/null || true
        echo "with one busy process beside it: $ours"
        echo "with one busy process beside it: $theirs"
        contended="$contended$ours
$theirs
"
    fi
    i=$((i + 1))
done
RESULTS="$results" CONTENDED="$contended" $py - <<'PY'
import json, os, statistics
runs = [json.loads(line) for line in os.environ["RESULTS"].splitlines() if line.strip()]
busy = [json.loads(line) for line in os.environ["CONTENDED"].splitlines() if line.strip()]
if busy:
    for side, quiet, loaded in (("spanprobe", runs[0::2], busy[0::2]), ("pytorch", runs[1::2], busy[1::2])):
        q = statistics.median(r["tokens_per_s"] for r in quiet)
        b = statistics.median(r["tokens_per_s"] for r in loaded)
        print(f"{side}: {b:.0f} tokens/s with a busy process beside it, {q:.0f} quiet: keeps {100 * b / q:.0f}%")
ours, theirs = [r["tokens_per_s"] for r in runs[0::2]], [r["tokens_per_s"] for r in runs[1::2]]
ratios = [a / b for a, b in zip(ours, theirs)]
for r in runs[0::2]:  # the roofline: the backend's sgemm with the same threads, in the same run
    print(f"spanprobe: {r['step_gflop']:.1f} GFLOP a step at {r['gflops']:.1f} GFLOP/s = {100 * r['of_sgemm']:.0f}% of "
          f"the measured sgemm throughput ({r['sgemm_gflops']:.1f} GFLOP/s, 2048^3, same threads)")
if len(ratios) == 1:
    print(f"ratio spanprobe/pytorch tokens/s: {ratios[0]:.2f}  ({ours[0]:.0f} vs {theirs[0]:.0f})")
else:
    print("ratios spanprobe/pytorch per round: " + " ".join(f"{r:.2f}" for r in ratios))
    print(f"median over {len(ratios)} rounds: ratio {statistics.median(ratios):.2f}; tokens/s "
          f"{statistics.median(ours):.0f} (spanprobe) vs {statistics.median(theirs):.0f} (pytorch)")
PY
