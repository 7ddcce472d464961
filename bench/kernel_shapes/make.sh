#!/bin/sh
# Regenerate the shapes files bench/device_measure.sh measures (needs the planner installed; no
# torch): the kernel look-ups cost_models/kernel_shapes.py derives for each model on dgx-h100 at
# TP 1-8, micro-batches 1-8, CP 1-4 (the model's own 8,192-token sequence), bf16 and fp8.
# tests/integration/cli/test_measure_kernels.py checks the committed files equal this output.
set -eu
cd "$(dirname "$0")/../.."
for model in llama3-8b llama3-70b; do
  planner measure kernels --model "$model" --cluster dgx-h100 --tp 1,2,4,8 --dtypes bf16,fp8 \
    --micro-batches 1,2,4,8 --cp 1,2,4 --shapes-only "bench/kernel_shapes/$model.dgx-h100.json"
done
