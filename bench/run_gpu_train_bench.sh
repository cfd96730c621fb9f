#!/bin/sh
# Training-step tokens/s on the GPU: spanprobe (--device cuda) next to the same model and optimizer
# in PyTorch eager, same run, for `pre` and `span`, in full fp32 and in TF32 (both sides switched
# together: SPANPROBE_TF32=1 and torch's allow_tf32). Model: 12 layers, d_model 768, 12 heads,
# d_ff 3072, sequence 1024, batch 8, byte vocabulary; AdamW (0.9, 0.95), clip 1.0.
# MFU = 6 * n_params * tokens/s / peak, with the H100 SXM dense peaks: 67 TFLOP/s fp32 (non-tensor)
# for the fp32 rows, 495 TFLOP/s TF32 tensor for the TF32 rows.
# Usage (repository root, on the GPU machine): [BUILD=dir] [STEPS=n] bench/run_gpu_train_bench.sh
set -eu
build=${BUILD:-build}
steps=${STEPS:-5}
make -s BUILD="$build" bench >/dev/null
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
shape="--d_model 768 --n_layers 12 --n_heads 12 --n_kv_heads 12 --d_ff 3072 --vocab_size 256"
torch_shape="--d-model 768 --n-layers 12 --n-heads 12 --d-ff 3072 --vocab 256"
echo "model: 12 layers, d_model 768, 12 heads, d_ff 3072, seq 1024, batch 8, vocab 256; training step; $steps timed steps (best)"
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo unknown); $(date -u +%Y-%m-%dT%H:%MZ)"
results=""
for precision in fp32 tf32; do
    tf32_env=0 tf32_flag=""
    if [ "$precision" = tf32 ]; then tf32_env=1 tf32_flag="--tf32"; fi
    for variant in pre span; do
        # shellcheck disable=SC2086
        ours=$(SPANPROBE_TF32=$tf32_env "$build"/bench/bench_model --device cuda --train --steps "$steps" \
            --seq 1024 --batch 8 --variant "$variant" $shape)
        # shellcheck disable=SC2086
        theirs=$($py bench/torch_model.py --device cuda $tf32_flag --train --steps "$steps" --seq 1024 --batch 8 \
            --variant "$variant" $torch_shape)
        echo "$precision $variant: $ours"
        echo "$precision $variant: $theirs"
        results="$results$precision $variant $ours
$precision $variant $theirs
"
    done
done
RESULTS="$results" $py - <<'PY'
import json, os
peak = {"fp32": 67e12, "tf32": 495e12}
lines = [l.split(" ", 2) for l in os.environ["RESULTS"].splitlines() if l.strip()]
print(f"{'precision':9} {'variant':7} {'spanprobe tok/s':>15} {'pytorch tok/s':>13} {'ratio':>6} "
      f"{'MFU ours':>8} {'MFU torch':>9}  (peak {{fp32: 67, tf32: 495}} TFLOP/s)")
for i in range(0, len(lines), 2):
    precision, variant = lines[i][0], lines[i][1]
    ours, theirs = json.loads(lines[i][2]), json.loads(lines[i + 1][2])
    mfu = lambda r: 6 * r["n_params"] * r["tokens_per_s"] / peak[precision]
    print(f"{precision:9} {variant:7} {ours['tokens_per_s']:15.0f} {theirs['tokens_per_s']:13.0f} "
          f"{ours['tokens_per_s'] / theirs['tokens_per_s']:6.2f} {100 * mfu(ours):7.1f}% {100 * mfu(theirs):8.1f}%")
PY
