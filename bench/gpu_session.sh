#!/bin/sh
# Everything that needs the GPU, on the accelerator machine (repository root), in two parts that
# each fit in one short command (a session has about 15 minutes of device time in all):
#   bench/gpu_session.sh tests   dependencies, CUDA build (every test binary too), every GPU test
#                                (tests/test_cuda_*; the op and model comparisons again with TF32),
#                                then the whole suite, TEST_JOBS binaries at a time (default: all
#                                cores), bounded by SUITE_TIMEOUT seconds (default 240)
#   bench/gpu_session.sh bench   dependencies, CUDA build (incremental when the build directory is
#                                still there), the training benchmark and the analyze benchmark
#                                (bench/run_gpu_analyze_bench.sh)
# Every step is bounded by STEP_TIMEOUT seconds (default 150), so a hang costs one step, not the
# session. The machine has no apt and no network: when .gpu_debs/ is present (tools/gpu_deps.sh
# download, run beforehand on a Debian machine, carried with the working tree), its packages are
# unpacked into /opt/spdeps (SPDEPS_PREFIX) and the build variables pointed there. The suite runs
# without fetching its data (the tests that need it skip). Writes the log, with date and device, to
# $OUT/gpu_session_PART.txt ($OUT defaults to ./gpu_session_out; the analyze benchmark adds its own
# two files there), appending as it goes, so a command cut short still leaves what it got. Exit
# status: the first failing step.
# Usage: [BUILD=dir] [JOBS=n] bench/gpu_session.sh tests|bench
set -u
part=${1:-}
case "$part" in tests | bench) ;; *) echo "usage: bench/gpu_session.sh tests|bench" >&2; exit 2 ;; esac
build=${BUILD:-build-gpu}
out=${OUT:-gpu_session_out}
jobs=${JOBS:-$(nproc)}
step_timeout=${STEP_TIMEOUT:-150}
mkdir -p "$out"
log="$out/gpu_session_$part.txt"
status=0
step() { # step NAME CMD...: appends the output, remembers the first failure
    name=$1
    shift
    echo "== $name: $*" | tee -a "$log"
    t0=$(date +%s)
    timeout "$step_timeout" "$@" >>"$log" 2>&1
    rc=$?
    echo "== $name: $(($(date +%s) - t0)) s" >>"$log"
    [ "$rc" -ne 124 ] || echo "== $name: timed out after $step_timeout s" | tee -a "$log"
    echo "== $name: exit $rc" | tee -a "$log"
    [ "$rc" -eq 0 ] || [ "$status" -ne 0 ] || status=$rc
}
{
    echo "spanprobe GPU session ($part), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: absent"
    nvcc --version 2>/dev/null | tail -1
} | tee "$log"

# The libraries the build needs, from the carried .deb files (never unpacked into /).
if [ -s .gpu_debs/always.list ]; then
    if env_lines=$(tools/gpu_deps.sh unpack .gpu_debs "${SPDEPS_PREFIX:-/opt/spdeps}" 2>>"$log"); then
        eval "$env_lines"
        tail -1 "$log"
    else
        echo "== deps: unpacking .gpu_debs failed (see $log)" | tee -a "$log"
        exit 3
    fi
else
    echo "== deps: no .gpu_debs/: using the machine's own libraries" | tee -a "$log"
fi

export SPANPROBE_BIN="$PWD/$build/spanprobe" BUILD_DIR="$PWD/$build"
if [ "$part" = tests ]; then
    step build make BUILD="$build" -j"$jobs" all bench tests
else
    step build make BUILD="$build" -j"$jobs" all bench
fi
[ "$status" -eq 0 ] || exit "$status"
if [ "$part" = tests ]; then
    for t in "$build"/tests/test_cuda_*; do
        case "$t" in *.d) continue ;; esac
        [ -x "$t" ] || continue
        step "$(basename "$t")" "$t"
    done
    step test_cuda_ops_tf32 env SPANPROBE_TF32=1 "$build"/tests/test_cuda_ops
    step test_cuda_model_tf32 env SPANPROBE_TF32=1 "$build"/tests/test_cuda_model
    step fixtures make BUILD="$build" fixtures
    # The tests that draw figures need gnuplot, which the carried packages leave out (tools/gpu_deps.sh).
    drawing='^$'
    if ! gnuplot -e 'exit' >/dev/null 2>&1; then
        drawing='/test_plot$\|/test_study$'
        echo "== suite: gnuplot cannot run here: test_plot and test_study are left out (they draw figures)" | tee -a "$log"
    fi
    step_timeout=${SUITE_TIMEOUT:-240}
    # shellcheck disable=SC2046
    step suite env TEST_JOBS="${TEST_JOBS:-$jobs}" OMP_NUM_THREADS=2 \
        tests/run_tests.sh $(ls "$build"/tests/test_* | grep -v '\.d$' | grep -v "$drawing")
else
    step train_bench env BUILD="$build" bench/run_gpu_train_bench.sh
    step analyze_bench env BUILD="$build" OUT="$out" bench/run_gpu_analyze_bench.sh
fi
grep -n "SKIPPED\|FAILED\|timed out\|^target\|^agreement" "$log" | head -40
exit "$status"
