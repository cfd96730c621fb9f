#!/bin/sh
# Scaling over MPI ranks (docs/scaling.md): the same training run as 1 rank x T threads and as
# T ranks x 1 thread (mpirun, --grad-accum T in both, so the two compute the same run), the study
# preset test-sweep and an analysis of the trained model both ways; prints the wall times, the
# speed-up, the bytes each rank sends and receives per training step (the gradient sums: a reduce
# to rank 0 and a broadcast of every parameter, sp_real each) and those the analysis moved. Usage: [BUILD=dir] bench/run_mpi_bench.sh [T]  (from the
# repository root; T defaults to 2; needs mpirun and a build with MPI).
set -eu
t=${1:-2}
build=${BUILD:-build}
bin=$build/spanprobe
"$bin" --version | grep -q "MPI: no" && { echo "run_mpi_bench: $bin has no MPI (make MPI=1)"; exit 1; }
mpirun="mpirun --allow-run-as-root --oversubscribe -np $t"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=${DATA:-data/mobydick.txt}
model="--n-layers 4 --d-model 128 --n-heads 4 --n-kv-heads 4 --d-ff 512 --max-seq-len 128"
run="$model --seq-len 128 --batch-size 8 --grad-accum $t --steps 40 --lr 1e-3 --warmup-steps 4 --log-every 10 --eval-every 0
     --ckpt-every 0 --device cpu --data $data"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
echo "train: d_model 128, 4 layers, batch 8 x 128 tokens, --grad-accum $t, 40 steps"
seconds() { s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
# shellcheck disable=SC2086
one=$(OMP_NUM_THREADS=$t seconds "$bin" train $run --out "$work/one")
# shellcheck disable=SC2086
many=$(OMP_NUM_THREADS=1 seconds $mpirun "$bin" train $run --out "$work/many")
params=$(OMP_NUM_THREADS=1 "$bin" init $model --out "$work/init.h5" | sed -n 's/.* d_model [0-9]*, \([0-9]*\) weights.*/\1/p')
echo "train: 1 rank x $t threads $one s, $t ranks x 1 thread $many s: speed-up $(echo "scale=2; $one / $many" | bc)"
echo "train: ${params:-?} parameters: each step every rank sends and receives ${params:-0} x 4 bytes twice" \
     "(reduce + broadcast) = $(echo "${params:-0} * 8 / 1048576" | bc) MiB"
one=$(OMP_NUM_THREADS=$t seconds "$bin" study --preset test-sweep --jobs 1 --out "$work/s1" --data "$data")
many=$(OMP_NUM_THREADS=1 seconds $mpirun "$bin" study --preset test-sweep --out "$work/s2" --data "$data")
echo "study test-sweep: 1 rank x $t threads $one s, $t ranks x 1 thread $many s: speed-up $(echo "scale=2; $one / $many" | bc)"
# analyze: the final checkpoint of the training run, the default analyzers on 8192 tokens
ckpt=$(ls "$work"/one/ckpt_*.h5 | tail -1)
one=$(OMP_NUM_THREADS=$t seconds "$bin" analyze "$ckpt" --data "$data" --n-tokens 8192 --out "$work/a1.h5")
many=$(OMP_NUM_THREADS=1 seconds $mpirun "$bin" analyze "$ckpt" --data "$data" --n-tokens 8192 --out "$work/a2.h5")
moved=$(OMP_NUM_THREADS=1 $mpirun "$bin" analyze "$ckpt" --data "$data" --n-tokens 8192 --out "$work/a3.h5" 2>/dev/null |
        sed -n 's/.*rank 0 moved \([0-9.]*\) MiB.*/\1/p')
echo "analyze (default analyzers, 8192 tokens): 1 rank x $t threads $one s, $t ranks x 1 thread $many s:" \
     "speed-up $(echo "scale=2; $one / $many" | bc); rank 0 moved ${moved:-?} MiB through the sums over the ranks"
"$bin" compare "$work/a1.h5" "$work/a2.h5" --quiet | tail -1
