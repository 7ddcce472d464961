"""The unfused-attention roofline against a measured unfused attention: PyTorch's standard
attention in the FlashAttention-2 paper's A100 benchmark.

Dao 2023 (FlashAttention-2, arXiv 2307.08691) Fig. 4 panels (c) and (d), shipped as
github.com/Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png (4f285b35), has a
"Pytorch" bar per sequence length: `attention_pytorch` of benchmarks/benchmark_flash_attention.py
(60499abc): torch.baddbmm into a preallocated [b*h, s, s] score tensor, `scores + causal_mask`
(a separate add), torch.softmax, F.dropout at p = 0 (a no-op), einsum with V; fp16, causal,
batch x seq = 16,384 tokens, 2,048 wide (32 heads of 64, 16 of 128), forward + backward TFLOP/s
counted as 4 b s^2 h d / 2 x 3.5. Out of memory at 16K.

This script prices that sequence of kernels with the cost model's roofline pieces
(cost_models.compute.unfused_attention_times' BMM rule: each of the six batched GEMMs at the
part's large-GEMM ceiling or its 2 bytes per score element at the achieved HBM bandwidth; the
streaming passes at that bandwidth), with PyTorch's passes in place of Megatron's fused softmax:
forward add 4 bytes per score element (the s x s mask is read from L2) and softmax 4 (reads the
whole row: the mask is a -10000 add, not a skipped triangle), backward softmax 6 (the add's
backward is the identity). It prints priced and measured TFLOP/s, their ratio, and Megatron's
own path (`unfused`, no dropout) at the same shapes. docs/cost_model.md "Unfused attention"
quotes it.

With `--pieces CSV` it reads instead what bench/measure_unfused_attention.py measured on a GPU
(bench/results/h100-2026-11-28/unfused_pieces.csv: Megatron-LM's own path, kernel by kernel, and
PyTorch's) and prints, per shape and kernel, the measured and priced seconds on that GPU's preset,
their ratio and the bytes per second the kernel achieved on the bytes the model counts.

Usage: python bench/unfused_vs_measured.py [--pieces CSV [--gpu PRESET]]
"""

from __future__ import annotations

import argparse
import csv
import statistics

import models_zoo
from cost_models.calibration import generation_for_gpu, hbm_bytes_per_s
from cost_models.compute import UNFUSED_TORCH_SOFTMAX_BYTES, score_bmm_s, unfused_attention_times
from cost_models.specs import Layout, ModelSpec, Workload
from cost_models.units import TFLOPS

SEQ_LENS = (512, 1024, 2048, 4096, 8192)
PYTORCH_FWD_BWD_TFLOPS = {64: (15, 16, 17, 18, 18), 128: (23, 28, 32, 32, 34)}
"""The "Pytorch" bar labels of panels (c) (head dim 64) and (d) (head dim 128), causal, A100 80GB
SXM4, at SEQ_LENS (16K: out of memory)."""
TOKENS, WIDTH = 16384, 2048
PYTORCH_PASS_BYTES = (4.0 + 4.0, 6.0)
"""(forward, backward) streaming bytes per score element besides the BMMs: the mask add (read 2,
write 2) and the softmax (read 2, write 2); its backward (read the gradient and the output,
write 2)."""


def counted_flops(batch: int, seq: int, heads: int, dim: int) -> float:
    """The benchmark's own count (benchmark_flash_attention.py flops, causal, fwd_bwd)."""
    return 4 * batch * seq**2 * heads * dim / 2 * 3.5


PIECE_BYTES = {
    "bmm1_fwd": 2.0, "bmm2_fwd": 2.0, "bmm_dp_bwd": 2.0, "bmm_dv_bwd": 2.0, "bmm_dq_bwd": 2.0,
    "bmm_dk_bwd": 2.0, "softmax_fwd": 3.0, "softmax_bwd": 4.0, "dropout_fwd": 5.0,
    "dropout_bwd": 5.0,
}  # fmt: skip
"""Bytes per score element the cost model counts for each measured kernel (the BMMs' score
matrix; compute.UNFUSED_SOFTMAX_BYTES, UNFUSED_DROPOUT_BYTES)."""
BMM_DIM = {"bmm1_fwd", "bmm2_fwd", "bmm_dp_bwd", "bmm_dv_bwd", "bmm_dq_bwd", "bmm_dk_bwd"}
TORCH_PIECE_BYTES = {
    "torch_mask_fwd": 5.0, "torch_softmax_fwd": 4.0, "torch_softmax_bwd": 6.0,
    "torch_mask_bwd": 5.0,
}  # fmt: skip
"""Megatron-Core's PyTorch softmax fallback (`--torch-softmax` rows, head dim 0), by kernel:
compute.UNFUSED_TORCH_SOFTMAX_BYTES's 9 + 11 bytes per score element (the in-place mask reads 2
and the bool mask 1 and writes 2; the softmax reads 2 and writes 2; its backward reads 2 + 2 and
writes 2; the mask's backward reads 2 + 1 and writes 2)."""


def priced_pieces(gpu_id: str, batch: int, seq: int, heads: int, dim: int) -> dict[str, float]:
    """Seconds the cost model prices for each kernel of bench/measure_unfused_attention.py (head
    dim 0: the PyTorch fallback's kernels alone, and their sum as `torch_fallback`)."""
    gpu = models_zoo.load_gpu(gpu_id)
    cal = generation_for_gpu(gpu)
    bytes_per_s = hbm_bytes_per_s(gpu, cal)
    elements = batch * heads * seq * seq
    if dim == 0:
        priced = {p: b * elements / bytes_per_s for p, b in TORCH_PIECE_BYTES.items()}
        assert sum(TORCH_PIECE_BYTES.values()) == sum(UNFUSED_TORCH_SOFTMAX_BYTES)
        priced["torch_fallback"] = sum(priced.values())
        return priced
    priced = {
        piece: score_bmm_s(elements, dim, gpu, cal)
        if piece in BMM_DIM
        else per_element * elements / bytes_per_s
        for piece, per_element in PIECE_BYTES.items()
    }
    for name, dropout in (("megatron_e2e", False), ("megatron_e2e_dropout", True)):
        model = ModelSpec(name="bench", num_layers=1, hidden_size=heads * dim,
                          num_attention_heads=heads, num_kv_heads=heads, head_dim=dim,
                          ffn_hidden_size=4 * heads * dim, vocab_size=32000,
                          hidden_dropout=dropout)  # fmt: skip
        work = Workload(seq_len=seq, global_batch_seqs=batch, attention_kernel="unfused")
        priced[name] = sum(
            unfused_attention_times(model, gpu, cal, work, Layout(micro_batch=batch))
        )
    priced["pytorch_e2e"] = (
        6 * score_bmm_s(elements, dim, gpu, cal) + sum(PYTORCH_PASS_BYTES) * elements / bytes_per_s
    )
    return priced


def pieces_main(path: str, gpu_id: str) -> int:
    gpu = models_zoo.load_gpu(gpu_id)
    bytes_per_s = hbm_bytes_per_s(gpu, generation_for_gpu(gpu))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    print(f"{gpu.name}: streaming priced at {bytes_per_s / 1e9:.0f} GB/s "
          f"({gpu.hbm_bandwidth_gb_per_s:.0f} datasheet)")  # fmt: skip
    shapes: dict[tuple[int, ...], dict[str, float]] = {}
    for row in rows:
        if row["piece"] == "copy":
            copy_s = float(row["seconds"])
            print(f"measured device-to-device copy: {2 * 2**31 / copy_s / 1e9:.0f} GB/s "
                  "read + written")  # fmt: skip
            continue
        key = tuple(int(row[k]) for k in ("batch", "seq", "heads", "head_dim"))
        shapes.setdefault(key, {})[row["piece"]] = float(row["seconds"])
    for measured in shapes.values():
        if set(TORCH_PIECE_BYTES) <= set(measured):
            measured["torch_fallback"] = sum(measured[p] for p in TORCH_PIECE_BYTES)
    ratios: dict[str, list[float]] = {}
    print("batch  seq  heads  dim  kernel                measured ms  priced ms  "
          "measured / priced  achieved GB/s")  # fmt: skip
    for (batch, seq, heads, dim), measured in shapes.items():
        priced = priced_pieces(gpu_id, batch, seq, heads, dim)
        elements = batch * heads * seq * seq
        for piece, seconds in measured.items():
            ratio = seconds / priced[piece]
            ratios.setdefault(piece, []).append(ratio)
            per_element = {**PIECE_BYTES, **TORCH_PIECE_BYTES}.get(piece)
            rate = (f"{per_element * elements / seconds / 1e9:13.0f}"
                    if per_element else f"{'':13s}")  # fmt: skip
            print(f"{batch:5d} {seq:5d} {heads:5d} {dim:4d}  {piece:20s}  {seconds * 1e3:11.3f}"
                  f"  {priced[piece] * 1e3:9.3f}  {ratio:17.2f}  {rate}")  # fmt: skip
    print("measured / priced by kernel: median (min-max)")
    for piece, values in ratios.items():
        print(
            f"  {piece:20s} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", help="unfused_pieces.csv of bench/measure_unfused_attention.py")
    parser.add_argument("--gpu", default="h100-sxm-80gb", help="the preset of the GPU measured")
    args = parser.parse_args(argv)
    if args.pieces:
        return pieces_main(args.pieces, args.gpu)
    gpu = models_zoo.load_gpu("a100-sxm-80gb")
    cal = generation_for_gpu(gpu)
    flops_per_s = gpu.peak_bf16_tflops * TFLOPS * cal.gemm_efficiency_bf16
    bytes_per_s = hbm_bytes_per_s(gpu, cal)
    print(f"{gpu.name}: large-GEMM rate {flops_per_s / TFLOPS:.1f} TFLOP/s, streaming "
          f"{bytes_per_s / 1e9:.0f} GB/s (the cost model's Ampere constants)")  # fmt: skip
    print("head dim  seq     measured  priced (PyTorch passes)  priced / measured  "
          "Megatron path priced")  # fmt: skip
    ratios = []
    for dim, measured in PYTORCH_FWD_BWD_TFLOPS.items():
        heads = WIDTH // dim
        for seq, tflops in zip(SEQ_LENS, measured, strict=True):
            batch = TOKENS // seq
            elements = batch * heads * seq * seq
            bmm_s = score_bmm_s(elements, dim, gpu, cal)
            seconds = 6 * bmm_s + sum(PYTORCH_PASS_BYTES) * elements / bytes_per_s
            priced = counted_flops(batch, seq, heads, dim) / seconds / TFLOPS
            model = ModelSpec(name="bench", num_layers=1, hidden_size=WIDTH,
                              num_attention_heads=heads, num_kv_heads=heads,
                              ffn_hidden_size=4 * WIDTH, vocab_size=32000)  # fmt: skip
            work = Workload(seq_len=seq, global_batch_seqs=batch, attention_kernel="unfused")
            fwd, bwd = unfused_attention_times(model, gpu, cal, work, Layout(micro_batch=batch))
            megatron = counted_flops(batch, seq, heads, dim) / (fwd + bwd) / TFLOPS
            ratios.append(priced / tflops)
            print(f"{dim:8d}  {seq:5d}  {tflops:8.0f}  {priced:23.1f}  {priced / tflops:17.2f}  "
                  f"{megatron:20.1f}")  # fmt: skip
    ratios.sort()
    print(f"priced / measured: {ratios[0]:.2f}-{ratios[-1]:.2f}, median "
          f"{ratios[len(ratios) // 2]:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
