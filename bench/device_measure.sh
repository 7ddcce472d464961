#!/bin/sh
# Measure on one GPU the kernels the cost model looks up for Llama 3 8B and 70B on dgx-h100
# (TP 1-8, micro-batches 1-8, CP 1-4, 8,192-token sequences; GEMMs in TN/NN/NT bf16 and TN fp8,
# cuDNN and FlashAttention-2 attention forward and forward + backward, memory-bound ops): the
# shapes files in bench/kernel_shapes/ (bench/kernel_shapes/make.sh writes them). Needs python3
# and torch only. From the repository root:
#
#   sh bench/device_measure.sh OUT_DIR [BUDGET_S]
#
# OUT_DIR receives gemm.csv, attention.csv, memory_bound.csv, metadata.json, README.md (the
# formats of ../shared/data/kernels; `planner calibrate --kernels OUT_DIR` reads them) and
# nvidia-smi.txt. BUDGET_S (default 240) caps the measuring time: the shapes run in one shuffled
# order, so a run cut short is an even sample (metadata.json counts what was left).
set -eu
OUT="${1:?usage: sh bench/device_measure.sh OUT_DIR [BUDGET_S]}"
BUDGET="${2:-240}"
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
python3 planner/calibrate/sweep.py kernels \
  --shapes bench/kernel_shapes/llama3-8b.dgx-h100.json bench/kernel_shapes/llama3-70b.dgx-h100.json \
  --out-dir "$OUT" --budget-s "$BUDGET"
