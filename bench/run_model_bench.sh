#!/bin/sh
# Forward+backward tokens/s of spanprobe's CPU model next to the same model in PyTorch, same run,
# same machine, same thread count (issue: model core performance). Installs Debian's python3-torch
# when it is missing. Usage: bench/run_model_bench.sh [THREADS]   (run from the repository root)
set -eu
threads=${1:-2}
make -s bench >/dev/null
if ! python3 -c 'import torch' 2>/dev/null && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-torch >/dev/null
fi
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
echo "model: pre, d_model 256, 8 layers, 8 heads, d_ff 1024, seq 256, batch 8, vocab 256; $threads threads"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(date -u +%Y-%m-%d)"
ours=$(build/bench/bench_model --steps 5)
theirs=$($py bench/torch_model.py --threads "$threads" --steps 5)
echo "$ours"
echo "$theirs"
$py - "$ours" "$theirs" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"ratio spanprobe/pytorch tokens/s: {a['tokens_per_s'] / b['tokens_per_s']:.2f}"
      f"  ({a['tokens_per_s']:.0f} vs {b['tokens_per_s']:.0f})")
PY
