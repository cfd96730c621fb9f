#!/bin/sh
# The full `spanprobe analyze` on the GPU next to the same computations in PyTorch eager on the same
# GPU (bench/analyze_torch.py --device cuda), same run, for a `pre` and a `span` model of 12 layers,
# d_model 768, 12 heads, d_ff 3072, max_seq_len 1024, byte vocabulary, on 8 sequences x 1024 tokens
# (issue 9's target: the full analysis in <= 1 s on an H100 and >= 5x faster than PyTorch eager).
# Then the agreement of spanprobe's CUDA report with a CPU fp64 reference report.
#
# Usage (repository root, on the GPU machine, after a CUDA build):
#   BUILD=build-gpu [OUT=dir] bench/run_gpu_analyze_bench.sh
# It builds nothing: BUILD names a directory holding a spanprobe built with CUDA (and, for the
# agreement check, spanprobe-f64 with the `compare` command; that step is skipped with a message
# when either is absent). Writes OUT/gpu_analyze_bench.txt (UTC date and device at the top, the
# table at the end) and OUT/gpu_analyze_raw.tar.gz (every stage table, report summary, PyTorch JSON,
# compare output); OUT defaults to bench_out. Exit status 1 when a run failed or timed out or a
# comparison disagreed.
#
# What runs, in this order (estimated at about 5 minutes on an H100 machine with 16 cores, not yet
# measured; every run is bounded by RUN_TIMEOUT seconds):
#  1. `spanprobe init` of both checkpoints. Random initialization is enough for timing: every
#     analyzer does a fixed amount of work for a given shape (the Jacobian iterations run exactly
#     POWER_ITERS products because --power-tol 1e-15 never stops them early; eigen- and singular
#     value solvers do not depend materially on the spectrum), and nothing here reads the values.
#  2. A token file of 8 x 1025 random byte ids (seeded): `--tokens` uses a file whole, cut into
#     windows of seq_len + 1 tokens, so the evaluation set is exactly these 8 sequences.
#  3. A warm-up `analyze` (not timed: first-touch costs of the driver, the GPU clocks, the files).
#  4. Per variant: the full default analysis (every analyzer, one process) and one run per analyzer
#     (--metrics NAME), with the Jacobian options matched to PyTorch's (--jac-seq 1024: the whole
#     sequence, --jac-tokens 4, --power-iters 20, --topk 8), gradient norms and pruning on the one
#     batch of 8. Stage times and the backend's peak memory come from the report summary (group
#     `run`: the stage table spanprobe prints); nvidia-smi is sampled every 100 ms beside each run
#     (process-level memory, the CUDA context included).
#  5. Per variant: bench/analyze_torch.py --device cuda (warm-up run, then ROUNDS timed rounds;
#     decompositions in float32 on the GPU, as a researcher writes them; TF32 off on both sides).
#  6. Agreement: `spanprobe-f64 analyze --device cpu` (float64 on the CPU, all cores) and
#     `spanprobe analyze --device cuda` on the SAME reduced set, then `spanprobe compare REF CUDA`
#     (exit 7 on disagreement). The set is reduced because float64 on the CPU is far slower than the
#     GPU: the 1024-token Jacobian iterations alone (~200 block JVP/VJP pairs x 20 iterations on
#     1024 tokens, ~0.2 PFLOP, plus 48 token-local Jacobians of 768 JVP columns each) would take
#     many minutes on 16 cores. REF_OPTS (2 sequences of 256 tokens, an 8-token
#     Jacobian sequence, 1 token-local position) exercises every analyzer and every CUDA code path
#     with the same model; each run is bounded by RUN_TIMEOUT like the others.
#
# ALONE=0 leaves out the runs of each analyzer alone (step 4's second half; the 'alone' column is
# then empty), AGREE=0 the agreement step (6; its fp64 side took 97 s on 16 cores on 2026-11-28):
# for a short device slot where those already ran on the same tree.
#
# Smaller configurations and a CPU dry run (the parsing and the table, no GPU):
#   DEVICE=cpu N_LAYERS=2 D_MODEL=32 N_HEADS=2 D_FF=64 SEQ=64 JAC_SEQ=16 POWER_ITERS=5 \
#     BUILD=build bench/run_gpu_analyze_bench.sh
set -eu
build=${BUILD:-build}
out=${OUT:-bench_out}
device=${DEVICE:-cuda}
N_LAYERS=${N_LAYERS:-12} D_MODEL=${D_MODEL:-768} N_HEADS=${N_HEADS:-12} D_FF=${D_FF:-3072}
SEQ=${SEQ:-1024} N_SEQS=${N_SEQS:-8} BATCH=${BATCH:-8} VARIANTS=${VARIANTS:-pre span}
JAC_SEQ=${JAC_SEQ:-$SEQ} JAC_TOKENS=${JAC_TOKENS:-4} POWER_ITERS=${POWER_ITERS:-20} TOPK=${TOPK:-8}
JAC_CHUNK=${JAC_CHUNK:-8} ROUNDS=${ROUNDS:-1} RUN_TIMEOUT=${RUN_TIMEOUT:-150} THREADS=${THREADS:-$(nproc)}
REF_OPTS=${REF_OPTS:---n-tokens 512 --seq-len 256 --batch 2 --jac-seq 8 --jac-tokens 1}
ALONE=${ALONE:-1} AGREE=${AGREE:-1}
bin="$build/spanprobe"
[ -x "$bin" ] || { echo "run_gpu_analyze_bench: $bin: not found (build first: make BUILD=$build)" >&2; exit 2; }
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
have_smi=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1 && have_smi=1
mkdir -p "$out"
log="$out/gpu_analyze_bench.txt"
work=$(mktemp -d)
raw="$work/raw"
mkdir -p "$raw"
# Cut short (a time limit), the raw files gathered so far are still kept.
trap 'tar -C "$work" -czf "$out/gpu_analyze_raw.tar.gz" raw 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
failed=0
{
    echo "spanprobe GPU analyze benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if [ "$have_smi" -eq 1 ]; then
        echo "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
    else
        echo "device: no nvidia-smi (analyze --device $device)"
    fi
    echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $THREADS threads"
    echo "pytorch: $($py -c 'import torch; print(torch.__version__)')"
    echo "model: $N_LAYERS layers, d_model $D_MODEL, $N_HEADS heads, d_ff $D_FF, vocab 256; variants: $VARIANTS"
    echo "evaluation: $N_SEQS x $SEQ tokens, batch $BATCH; jacobian: $JAC_SEQ tokens, $POWER_ITERS products per run," \
         "top-$TOPK, $JAC_TOKENS token-local positions; grad_norms and pruning on 1 batch"
} | tee "$log"

# run NAME CMD...: stdout to raw/NAME.out, stderr to raw/NAME.err, bounded by RUN_TIMEOUT; the wall
# time and the exit status to raw/NAME.run; nvidia-smi's largest memory.used during the run (MiB,
# minus what was in use before) to raw/NAME.smi
run() {
    name=$1
    shift
    smi_pid=""
    if [ "$have_smi" -eq 1 ]; then
        base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$raw/$name.smi_samples" 2>/dev/null &
        smi_pid=$!
    fi
    t0=$(date +%s.%N)
    rc=0
    timeout "$RUN_TIMEOUT" "$@" >"$raw/$name.out" 2>"$raw/$name.err" || rc=$?
    t1=$(date +%s.%N)
    if [ -n "$smi_pid" ]; then
        kill "$smi_pid" 2>/dev/null || true
        wait "$smi_pid" 2>/dev/null || true
        awk -v base="$base" 'BEGIN { m = base } $1 + 0 > m { m = $1 + 0 } END { print m - base }' \
            "$raw/$name.smi_samples" >"$raw/$name.smi"
    fi
    echo "$rc $t0 $t1" >"$raw/$name.run"
    # Each run's wall time as it ends, so a benchmark cut short still says what it measured.
    echo "  $name: $(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }') s wall" >>"$log"
    if [ "$rc" -ne 0 ]; then
        failed=1
        what="exit $rc"
        [ "$rc" -ne 124 ] || what="timed out after $RUN_TIMEOUT s"
        echo "  $name: $what: $(tail -1 "$raw/$name.err")" | tee -a "$log"
    fi
    return 0
}

# The same tokens for both sides: N_SEQS windows of SEQ + 1 random byte ids.
$py -c "import random, sys; random.seed(9); print(' '.join(str(random.randrange(256)) for _ in range(int(sys.argv[1]))))" \
    "$((N_SEQS * (SEQ + 1)))" >"$work/tokens.txt"
for variant in $VARIANTS; do
    "$bin" init --variant "$variant" --n-layers "$N_LAYERS" --d-model "$D_MODEL" --n-heads "$N_HEADS" \
        --n-kv-heads "$N_HEADS" --d-ff "$D_FF" --max-seq-len "$SEQ" --out "$work/$variant.h5" >/dev/null
done
# the default set: the opt-in analyzers (curvature: minutes a block at 1024 tokens) have no
# PyTorch counterpart here, and one took the whole step on 2026-11-27
analyzers=$("$bin" analyze --help | sed -n '/^analyzers (--metrics/,/^$/p' | awk 'NR > 1 && NF && !/\(opt-in\)/ { print $1 }')
# --grad-batches / --prune-batches N_SEQS: every sequence takes part, as in PyTorch's one batch of
# N_SEQS, also when the 8 GiB budget cuts spanprobe's batch (docs/benchmarks.md, "Memory")
opts="--tokens $work/tokens.txt --n-tokens $((N_SEQS * SEQ)) --seq-len $SEQ --batch $BATCH --grad-batches $N_SEQS
      --prune-batches $N_SEQS --jac-seq $JAC_SEQ --jac-tokens $JAC_TOKENS --power-iters $POWER_ITERS --power-tol 1e-15
      --topk $TOPK"
first=${VARIANTS%% *}
echo "warm-up: spanprobe analyze ($first)" | tee -a "$log"
# shellcheck disable=SC2086
run "warmup" "$bin" analyze "$work/$first.h5" --out "$work/warmup.h5" --device "$device" $opts
for variant in $VARIANTS; do
    echo "$variant: spanprobe, the full analysis and each analyzer alone" | tee -a "$log"
    # shellcheck disable=SC2086
    run "sp_${variant}_full" "$bin" analyze "$work/$variant.h5" --out "$work/sp_${variant}_full.h5" --device "$device" $opts
    [ "$ALONE" = 0 ] || for an in $analyzers; do
        # shellcheck disable=SC2086
        run "sp_${variant}_$an" "$bin" analyze "$work/$variant.h5" --out "$work/sp_${variant}_$an.h5" \
            --device "$device" --metrics "$an" $opts
    done
    echo "$variant: pytorch" | tee -a "$log"
    run "torch_$variant" "$py" bench/analyze_torch.py --device "$device" --variant "$variant" --threads "$THREADS" \
        --rounds "$ROUNDS" --tokens "$work/tokens.txt" --d-model "$D_MODEL" --n-layers "$N_LAYERS" \
        --n-heads "$N_HEADS" --d-ff "$D_FF" --seq "$SEQ" --batch "$BATCH" --n-tokens "$((N_SEQS * SEQ))" \
        --grad-batches 1 --prune-batches 1 --jac-seq "$JAC_SEQ" --jac-tokens "$JAC_TOKENS" \
        --power-iters "$POWER_ITERS" --topk "$TOPK" --jac-chunk "$JAC_CHUNK"
done
for f in "$work"/*.json; do [ ! -e "$f" ] || cp "$f" "$raw/$(basename "$f" .json).summary.json"; done

# Agreement with the fp64 CPU reference, on the reduced set REF_OPTS.
ref_note=""
if [ "$AGREE" = 0 ]; then
    ref_note="left out (AGREE=0)"
elif [ ! -x "$build/spanprobe-f64" ]; then
    ref_note="skipped: $build/spanprobe-f64 is absent (the fp64 CLI; make BUILD=$build builds it where the Makefile has it)"
elif ! "$bin" compare --help >/dev/null 2>&1; then
    ref_note="skipped: this spanprobe has no compare command"
fi
for variant in $VARIANTS; do
    if [ -n "$ref_note" ]; then
        echo "agreement $variant: $ref_note" >"$raw/cmp_$variant.out"
        continue
    fi
    echo "$variant: fp64 CPU reference and $device report on the reduced set ($REF_OPTS)" | tee -a "$log"
    ref_common="--tokens $work/tokens.txt --power-iters $POWER_ITERS --power-tol 1e-15 --topk $TOPK
                --grad-batches 1 --prune-batches 1 $REF_OPTS"
    # shellcheck disable=SC2086
    run "ref_${variant}_f64" "$build/spanprobe-f64" analyze "$work/$variant.h5" --out "$work/ref_$variant.h5" \
        --device cpu $ref_common
    # shellcheck disable=SC2086
    run "ref_${variant}_$device" "$bin" analyze "$work/$variant.h5" --out "$work/dev_$variant.h5" \
        --device "$device" $ref_common
    if [ -s "$work/ref_$variant.h5" ] && [ -s "$work/dev_$variant.h5" ]; then
        run "cmp_$variant" "$bin" compare "$work/ref_$variant.h5" "$work/dev_$variant.h5"
    else
        echo "agreement $variant: skipped: a report is missing (see above)" >"$raw/cmp_$variant.out"
    fi
done
for f in "$work"/ref_*.json "$work"/dev_*.json; do [ ! -e "$f" ] || cp "$f" "$raw/$(basename "$f" .json).summary.json"; done

RAW="$raw" VARIANTS="$VARIANTS" ANALYZERS="$analyzers" HAVE_SMI="$have_smi" $py - <<'PY' | tee -a "$log"
import json, math, os
raw, variants, analyzers = os.environ["RAW"], os.environ["VARIANTS"].split(), os.environ["ANALYZERS"].split()
nan = float("nan")


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_info(name):
    """(exit status, wall seconds, nvidia-smi peak MiB) of a run; NaN where unknown."""
    try:
        rc, t0, t1 = open(f"{raw}/{name}.run").read().split()
        rc, wall = int(rc), float(t1) - float(t0)
    except (OSError, ValueError):
        rc, wall = -1, nan
    try:
        smi = float(open(f"{raw}/{name}.smi").read())
    except (OSError, ValueError):
        smi = nan
    return rc, wall, smi


def spanprobe_stages(name):
    """{stage: seconds} from a report summary's `run` group: a streaming analyzer's share of the pass
    plus its finish; 'forward passes' is the pass itself (begin included)."""
    s = load_json(f"{raw}/{name}.summary.json")
    r = (s or {}).get("metrics", {}).get("run")
    if not r:
        return None
    stages = {"forward passes": r.get("seconds_input", nan)}
    for an in analyzers:
        keys = [k for k in (f"seconds_pass_{an}", f"seconds_finish_{an}") if k in r]
        if keys:
            stages[an] = sum(r[k] for k in keys)
    stages["total"] = r.get("seconds_total", nan)
    stages["peak_backend_mib"] = r.get("peak_backend_mib", nan)
    return stages


def fmt(x, width, digits=3):
    return f"{'-':>{width}}" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:{width}.{digits}f}"


print()
print(f"{'variant':8} {'stage':16} {'spanprobe s':>11} {'alone s':>9} {'PyTorch s':>10} {'ratio':>7}")
summary = []
for v in variants:
    full = spanprobe_stages(f"sp_{v}_full") or {}
    torch_json = None
    if run_info(f"torch_{v}")[0] == 0:
        torch_json = load_json(f"{raw}/torch_{v}.out")
    theirs = (torch_json or {}).get("stages", {})
    names = ["forward passes"] + [a for a in analyzers if a in full or a in theirs]
    for stage in names:
        ours = full.get(stage)
        alone = None
        if stage != "forward passes":
            single = spanprobe_stages(f"sp_{v}_{stage}") or {}
            alone = single.get(stage)
        t = theirs.get(stage)
        ratio = t / ours if ours and t is not None else None
        print(f"{v:8} {stage:16} {fmt(ours, 11)} {fmt(alone, 9)} {fmt(t, 10)} {fmt(ratio, 7, 2)}")
    total, t_total = full.get("total"), (torch_json or {}).get("total_s")
    ratio = t_total / total if total and t_total is not None else None
    print(f"{v:8} {'total':16} {fmt(total, 11)} {'':>9} {fmt(t_total, 10)} {fmt(ratio, 7, 2)}")
    rc, wall, smi = run_info(f"sp_{v}_full")
    _, t_wall, t_smi = run_info(f"torch_{v}")
    print(f"{v:8} {'process wall':16} {fmt(wall, 11)} {'':>9} {fmt(t_wall, 10)}   (start, load, report"
          " write; PyTorch: import, warm-up and every round)")
    print(f"{v:8} peak GPU memory: spanprobe {fmt(full.get('peak_backend_mib'), 1, 0)} MiB through the backend,"
          f" {fmt(smi, 1, 0)} MiB nvidia-smi; PyTorch {fmt((torch_json or {}).get('peak_gpu_mib'), 1, 0)} MiB"
          f" allocated, {fmt((torch_json or {}).get('peak_gpu_reserved_mib'), 1, 0)} MiB reserved,"
          f" {fmt(t_smi, 1, 0)} MiB nvidia-smi")
    summary.append((v, total, ratio))
print("(ratio = PyTorch / spanprobe: > 1 means spanprobe is faster; 'spanprobe s' from the full analysis,"
      " 'alone' from a run of that analyzer only;\n nvidia-smi figures are the growth of memory.used during"
      " the process, CUDA context included)")
if torch_json:
    print(f"PyTorch: {torch_json['impl']}, {torch_json['device']}, decompositions in {torch_json['linalg_dtype']},"
          f" tf32 {torch_json['tf32']}, {torch_json['rounds']} timed round(s) after a warm-up: {torch_json['warmup']}")
for v, total, ratio in summary:
    if total is None or ratio is None:
        print(f"target {v}: not measured (a run failed)")
        continue
    print(f"target {v}: full analysis {total:.3f} s (<= 1 s: {'yes' if total <= 1 else 'no'}),"
          f" {ratio:.2f}x PyTorch (>= 5x: {'yes' if ratio >= 5 else 'no'})")
print()
for v in variants:
    try:
        lines = [l.rstrip() for l in open(f"{raw}/cmp_{v}.out") if l.strip()]
    except OSError:
        lines = []
    rc = run_info(f"cmp_{v}")[0]
    verdict = {0: "PASS", 7: "FAIL (exit 7: outside tolerance)"}.get(rc, f"not run (exit {rc})")
    if lines and lines[-1].startswith("agreement"):
        print(lines[-1])
    else:
        print(f"agreement {v} (fp64 CPU reference vs this device, reduced set): {verdict}"
              + (f": {lines[-1]}" if lines else ""))
PY
tar -C "$work" -czf "$out/gpu_analyze_raw.tar.gz" raw
exit "$failed"
