#!/bin/sh
# Measure on one GPU the kernels the cost model looks up for Llama 3 8B and 70B on dgx-h100
# (TP 1-8, micro-batches 1-8, CP 1-4, 8,192-token sequences; GEMMs in TN/NN/NT bf16 and TN fp8,
# cuDNN and FlashAttention-2 attention forward and forward + backward, memory-bound ops): the
# shapes files in bench/kernel_shapes/ (bench/kernel_shapes/make.sh writes them). Needs python3
# and torch only. From the repository root:
#
#   sh bench/device_measure.sh OUT_DIR [BUDGET_S] [SUSTAINED_S]
#
# OUT_DIR receives gemm.csv, attention.csv, memory_bound.csv, metadata.json, README.md (the
# formats of ../shared/data/kernels; `planner calibrate --kernels OUT_DIR` reads them) and
# nvidia-smi.txt. BUDGET_S (default 210) caps the measuring time: the shapes run in one shuffled
# order, so a run cut short is an even sample (metadata.json counts what was left). Then
# SUSTAINED_S (default 20) seconds each of 8192^3 bf16 and fp8 GEMMs in 2-s windows write
# sustained.csv and sustained_fp8.csv (the rates under the power cap, which calibrate caps GEMM
# look-ups at). Expected wall time: ~1.5-3 min measuring (the first H100 run took 71 s without
# the launch hold, which adds up to ~30 ms per small shape) + 40 s + start-up; at most ~4.5 min.
set -eu
OUT="${1:?usage: sh bench/device_measure.sh OUT_DIR [BUDGET_S] [SUSTAINED_S]}"
BUDGET="${2:-210}"
SUSTAINED="${3:-20}"
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
python3 planner/calibrate/sweep.py kernels \
  --shapes bench/kernel_shapes/llama3-8b.dgx-h100.json bench/kernel_shapes/llama3-70b.dgx-h100.json \
  --out-dir "$OUT" --budget-s "$BUDGET" --sustained-s "$SUSTAINED"
