#!/bin/sh
# Everything that needs the GPU, in one go, on the accelerator machine (repository root):
# builds with CUDA, runs the GPU tests (fp32, then the op and model comparisons again with TF32),
# the whole suite, and the training benchmark; writes the log, with date and device, to
# $OUT/gpu_session.txt ($OUT defaults to ./gpu_session_out). Exit status: the first failing part.
# Usage: [BUILD=dir] [JOBS=n] bench/gpu_session.sh
set -u
build=${BUILD:-build-gpu}
out=${OUT:-gpu_session_out}
mkdir -p "$out"
log="$out/gpu_session.txt"
status=0
run() { # run NAME CMD...: appends the output, remembers the first failure
    name=$1
    shift
    echo "== $name: $*" | tee -a "$log"
    "$@" >>"$log" 2>&1
    rc=$?
    echo "== $name: exit $rc" | tee -a "$log"
    [ "$rc" -eq 0 ] || [ "$status" -ne 0 ] || status=$rc
}
{
    echo "spanprobe GPU session, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: absent"
    nvcc --version 2>/dev/null | tail -1
} | tee "$log"
export SPANPROBE_BIN="$PWD/$build/spanprobe" BUILD_DIR="$PWD/$build"
run build make BUILD="$build" -j"${JOBS:-8}" all bench
run test_cuda_ops "$build"/tests/test_cuda_ops
run test_cuda_model "$build"/tests/test_cuda_model
run test_cuda_ops_tf32 env SPANPROBE_TF32=1 "$build"/tests/test_cuda_ops
run test_cuda_model_tf32 env SPANPROBE_TF32=1 "$build"/tests/test_cuda_model
run suite make BUILD="$build" -j"${JOBS:-8}" test
run train_bench env BUILD="$build" bench/run_gpu_train_bench.sh
grep -n "SKIPPED\|FAILED" "$log" | head -40
exit "$status"
