#!/bin/sh
# Training-step tokens/s (forward, backward, clipping, AdamW) of spanprobe's CPU model next to the
# same model and optimizer in PyTorch, same run and thread count. Usage: bench/run_train_bench.sh [THREADS]
BENCH_MODE=train exec "$(dirname "$0")/run_model_bench.sh" "$@"
