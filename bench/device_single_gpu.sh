#!/bin/sh
# One device call (issue 32): measure, on one GPU, the kernels the cost model looks up for the
# single-GPU step configs of bench/device_train_steps.py (their shapes files in
# bench/single_gpu/shapes/, written by `planner measure kernels --shapes-only`), then run those
# training steps on the same GPU. Needs python3 + torch only. From the repository root:
#
#   sh bench/device_single_gpu.sh OUT_DIR [BUDGET_S] [SUSTAINED_S]
#
# OUT_DIR receives res.tgz (kern/: gemm.csv, attention.csv, grouped_gemm.csv, memory_bound.csv,
# sustained*.csv, metadata.json; steps/: steps.csv, steps_runs.yaml, profile_*.json), steps.csv
# and log.txt. Then, here: `planner calibrate --cluster dgx-h100 --kernels kern -o cal.yaml` and
# `planner validate --data steps/steps_runs.yaml --cluster-file cal.yaml` (bench/single_gpu_vs_model.py).
set -u
OUT="${1:?usage: sh bench/device_single_gpu.sh OUT_DIR [BUDGET_S] [SUSTAINED_S]}"
BUDGET="${2:-120}"
SUSTAINED="${3:-15}"
W=/tmp/single_gpu
mkdir -p "$OUT" "$W/kern" "$W/steps"
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
{
  nvidia-smi
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  python3 planner/calibrate/sweep.py kernels --shapes bench/single_gpu/shapes/*.json \
    --out-dir "$W/kern" --budget-s "$BUDGET" --sustained-s "$SUSTAINED"
  python3 bench/device_train_steps.py --models bench/single_gpu --out "$W/steps"
} > "$OUT/log.txt" 2>&1
cp "$W/steps/steps.csv" "$OUT/" 2>/dev/null
tar czf "$OUT/res.tgz" -C "$W" kern steps
tail -30 "$OUT/log.txt"
