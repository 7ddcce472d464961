"""Unfused attention measured piece by piece on one GPU: Megatron-LM's own path and PyTorch's.

What `Workload.attention_kernel: unfused` prices (cost_models.compute.unfused_attention_times:
six batched GEMMs on the roofline, the causal fused softmax and attention dropout as streaming
bytes per score element) is checked here against the kernels themselves:

- Megatron-LM's path, as its ParallelAttention ran it before FlashAttention (megatron/model/
  transformer.py at a8d172b31e; Megatron-Core's DotProductAttention keeps it): torch.baddbmm
  (beta 0) of Q [b*h, s, d] (a transposed view of [s, b*h, d]) with K^T into a fresh
  [b*h, s, s] buffer, Megatron's scaled_upper_triang_masked_softmax CUDA kernel, optionally
  attention dropout (ATen native_dropout, p 0.1), torch.bmm with V; forward and backward
  through autograd (`megatron_e2e`, `megatron_e2e_dropout`) and each kernel alone (the
  backward's four BMMs, the softmax backward, dropout forward / backward).
- PyTorch's standard attention of the FlashAttention-2 paper's benchmark
  (benchmarks/benchmark_flash_attention.py attention_pytorch at 60499abc: baddbmm, a -10000
  triangle added as a separate tensor, torch.softmax, einsum), forward + backward
  (`pytorch_e2e`): the A100 figure bench/unfused_vs_measured.py compares with.
- A device-to-device copy (`copy`, bytes read + written per second): the bandwidth the
  streaming terms are measured against.

Megatron's kernel is compiled here from Megatron-LM's own source (torch.utils.cpp_extension,
sm_90): `--extract GIT_DIR OUT_DIR` writes the five files of megatron/fused_kernels at
MEGATRON_KERNELS_COMMIT from a Megatron-LM git directory (`fetch` github:NVIDIA/Megatron-LM);
the product never ships them. Without the folder (or if the build fails) the Megatron pieces
are skipped and said so.

Timing: each call back to back behind a sleep kernel for the host's launch time (as
planner/calibrate/kernel_sweep.py), windows of at least 10 ms, the median of WINDOWS windows.
Shapes: the FA2 benchmark's (16,384 tokens x 2,048 wide: 32 heads of 64 or 16 of 128, sequence
512-8,192) and the Megatron 2021 GPT-3 1.7B record's (24 heads of 96, sequence 2,048, 8 per
micro-batch). bf16.

Usage (on the GPU machine):
  python3 bench/measure_unfused_attention.py --extract GIT_DIR .megatron_fused   # here
  python3 bench/measure_unfused_attention.py --kernels .megatron_fused --out OUT  # there
  ... --grid (the per-TP-rank calls, GRID), --torch-softmax (Megatron-Core's PyTorch fallback,
  TORCH_SOFTMAX; needs no Megatron kernel), --smoke (the CPU loop, no figures). A built kernel
  placed in .megatron_fused/prebuilt/ by a machine of the same image is loaded instead of built.
Writes OUT/unfused_pieces.csv (shape, piece, seconds) and OUT/unfused_meta.json (with `--grid`:
the GRID shapes' kernels alone, OUT/unfused_grid.csv and unfused_grid_meta.json). Compared with
the cost model by `python bench/unfused_vs_measured.py --pieces OUT/unfused_pieces.csv`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

MEGATRON_KERNELS_COMMIT = "040eac9414ccbd1301ae16369c3044c5632b7e14"
"""Megatron-LM's last commit with megatron/fused_kernels (2023-07-14; the next, cd126362bb,
"Switch custom fused softmax kernels to apex", moved them to apex / Transformer Engine, which
ship the same kernel). Its causal kernel takes sequences up to 16,384 (the 2021 copy: 2,048)."""
MEGATRON_KERNEL_FILES = (
    "compat.h",
    "type_shim.h",
    "scaled_upper_triang_masked_softmax.h",
    "scaled_upper_triang_masked_softmax.cpp",
    "scaled_upper_triang_masked_softmax_cuda.cu",
)
SHAPES = tuple(
    (16384 // seq, seq, 2048 // dim, dim)
    for dim in (64, 128)
    for seq in (512, 1024, 2048, 4096, 8192)
) + ((8, 2048, 24, 96),)
"""(batch, seq, heads, head dim)."""
GRID_MIN_ELEMENTS = 2**26
"""`--grid` times calls whose score matrix (2 bytes per element) is at least 128 MiB, twice the
H100's L2, so the back-to-back calls stream from HBM as a training step's do."""
GRID = tuple(
    (1, seq, bh, dim)
    for dim in (64, 96, 128)
    for seq in (1024, 2048, 4096, 8192)
    for bh in (4, 8, 16, 32, 64, 128)
    if GRID_MIN_ELEMENTS <= bh * seq * seq < 2**31
)
"""`--grid`: the per-TP-rank calls of Megatron configs (batch x heads per rank 4-128, one
sequence per call: the look-up keys on batch x heads), forward and backward kernels only."""
MIN_WINDOW_S = 0.010
WINDOWS = 3
HOST_S_PER_CALL = 15e-6
MAX_HOLD_S = 0.03
SLEEP_CYCLES_PER_S = 2.0e9
DROPOUT_P = 0.1
MAX_KERNEL_ELEMENTS = 2**31
"""Megatron's kernel indexes the score matrix with 32-bit ints (first_batch * stride in
scaled_upper_triang_masked_softmax.h): at 2**31 elements or more it fails (seen on the H100 at
64 x 8,192^2), so those shapes time PyTorch's path only."""


def extract(git_dir: str, out_dir: str) -> None:
    """Write Megatron-LM's causal fused-softmax sources at MEGATRON_KERNELS_COMMIT."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in MEGATRON_KERNEL_FILES:
        text = subprocess.run(
            ["git", "--git-dir", git_dir, "show",
             f"{MEGATRON_KERNELS_COMMIT}:megatron/fused_kernels/{name}"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        (out / name).write_text(text)
    print(f"wrote {len(MEGATRON_KERNEL_FILES)} files to {out}")


def build_megatron_softmax(src: Path, build: Path):
    """Megatron's kernel through torch's JIT extension build, with the flags of
    megatron/fused_kernels/__init__.py (sm_90 in place of its sm_70 / sm_80 list)."""
    import os

    from torch.utils import cpp_extension

    os.environ["TORCH_CUDA_ARCH_LIST"] = ""
    build.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(
        name="scaled_upper_triang_masked_softmax_cuda",
        sources=[str(src / "scaled_upper_triang_masked_softmax.cpp"),
                 str(src / "scaled_upper_triang_masked_softmax_cuda.cu")],
        build_directory=str(build),
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3", "-gencode", "arch=compute_90,code=sm_90", "--use_fast_math",
                           "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                           "--expt-relaxed-constexpr", "--expt-extended-lambda"],
        verbose=False,
    )  # fmt: skip


def make_timer(torch, on_gpu: bool):
    hold = getattr(torch.cuda, "_sleep", None)

    def window(fn, reps: int) -> float:
        if not on_gpu:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            return time.perf_counter() - t0
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if hold is not None:
            hold(int(min(reps * HOST_S_PER_CALL, MAX_HOLD_S) * SLEEP_CYCLES_PER_S))
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def timed(fn) -> float:
        fn()
        fn()
        one = max(window(fn, 1), 1e-7)
        reps = max(2, math.ceil(MIN_WINDOW_S / one))
        return statistics.median(window(fn, reps) / reps for _ in range(WINDOWS))

    return timed


def megatron_softmax_function(torch, mod):
    """Megatron's ScaledUpperTriangMaskedSoftmax autograd function (megatron/model/
    fused_softmax.py): the kernel's forward, and its backward in place on the gradient."""

    class ScaledUpperTriangMaskedSoftmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inputs, scale):
            scale_t = torch.tensor([scale])
            out = mod.forward(inputs, scale_t[0])
            ctx.save_for_backward(out, scale_t)
            return out

        @staticmethod
        def backward(ctx, grads):
            out, scale_t = ctx.saved_tensors
            return mod.backward(grads, out, scale_t[0]), None

    return ScaledUpperTriangMaskedSoftmax


class ReferenceSoftmax:
    """The kernel's semantics in plain torch (scale, mask above the diagonal, softmax; the
    backward of softmax): `--smoke` runs the Megatron pieces with it on the CPU, and a GPU run
    checks the built kernel against it on a small input before timing anything."""

    def __init__(self, torch):
        self.torch = torch

    def forward(self, x, scale):
        seq = x.shape[-1]
        mask = self.torch.ones(seq, seq, dtype=self.torch.bool, device=x.device).triu(1)
        return self.torch.softmax((x.float() * scale).masked_fill(mask, float("-inf")), -1).to(
            x.dtype
        )

    def backward(self, grad, out, scale):
        g, y = grad.float(), out.float()
        return ((g - (g * y).sum(-1, keepdim=True)) * y * scale).to(grad.dtype)


def check_kernel(torch, mod) -> float:
    """Largest difference between the built kernel and ReferenceSoftmax (forward, backward)."""
    ref = ReferenceSoftmax(torch)
    x = torch.randn(8, 256, 256, device="cuda", dtype=torch.bfloat16)
    g = torch.randn_like(x)
    y, y_ref = mod.forward(x, 0.5), ref.forward(x, 0.5)
    dx_ref = ref.backward(g, y, 0.5)
    dx = mod.backward(g.clone(), y, 0.5)
    return max(float((y.float() - y_ref.float()).abs().max()),
               float((dx.float() - dx_ref.float()).abs().max()))  # fmt: skip


def measure_shape(torch, timed, softmax_fn, mod, shape, dev: str, whole: bool = True) -> list[dict]:
    batch, seq, heads, dim = shape
    bh = batch * heads
    bf = torch.bfloat16
    rows: list[dict] = []

    def rec(piece: str, fn) -> None:
        rows.append({"batch": batch, "seq": seq, "heads": heads, "head_dim": dim,
                     "piece": piece, "seconds": timed(fn)})  # fmt: skip

    alpha = 1.0 / math.sqrt(dim)
    # Megatron's layout: [s, b*h, d], the BMMs read transposed views of it.
    q, k, v = (torch.randn(seq, bh, dim, device=dev, dtype=bf) for _ in range(3))
    if mod is not None and bh * seq * seq < MAX_KERNEL_ELEMENTS:

        def megatron_forward(q, k, v, dropout: bool):
            buf = torch.empty(bh, seq, seq, device=dev, dtype=bf)
            scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2),
                                   beta=0.0, alpha=alpha)  # fmt: skip
            probs = softmax_fn.apply(scores, 1.0)
            if dropout:
                probs = torch.nn.functional.dropout(probs, DROPOUT_P, training=True)
            return torch.bmm(probs, v.transpose(0, 1))

        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        grad_out = torch.randn(bh, seq, dim, device=dev, dtype=bf)
        for name, drop in (("megatron_e2e", False), ("megatron_e2e_dropout", True))[: 2 * whole]:

            def e2e(drop=drop):
                megatron_forward(qg, kg, vg, drop).backward(grad_out)

            rec(name, e2e)
            qg.grad = kg.grad = vg.grad = None

        buf = torch.empty(bh, seq, seq, device=dev, dtype=bf)
        qt, kt, vt = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        rec("bmm1_fwd", lambda: torch.baddbmm(buf, qt, kt.transpose(1, 2), beta=0.0, alpha=alpha))
        scores = torch.baddbmm(buf, qt, kt.transpose(1, 2), beta=0.0, alpha=alpha)
        rec("softmax_fwd", lambda: mod.forward(scores, 1.0))
        probs = mod.forward(scores, 1.0)
        del scores, buf
        rec("bmm2_fwd", lambda: torch.bmm(probs, vt))
        d_out = torch.randn(bh, seq, dim, device=dev, dtype=bf)
        rec("bmm_dp_bwd", lambda: torch.bmm(d_out, vt.transpose(1, 2)))  # dP = dO V^T
        rec("bmm_dv_bwd", lambda: torch.bmm(probs.transpose(1, 2), d_out))  # dV = P^T dO
        d_probs = torch.bmm(d_out, vt.transpose(1, 2))
        rec("softmax_bwd", lambda: mod.backward(d_probs, probs, 1.0))  # in place, as Megatron's
        d_scores = d_probs
        rec("bmm_dq_bwd", lambda: torch.bmm(d_scores, kt))  # dQ = dS K
        rec("bmm_dk_bwd", lambda: torch.bmm(d_scores.transpose(1, 2), qt))  # dK = dS^T Q
        rec("dropout_fwd", lambda: torch.ops.aten.native_dropout(probs, DROPOUT_P, True))
        _, mask = torch.ops.aten.native_dropout(probs, DROPOUT_P, True)
        scale = 1.0 / (1.0 - DROPOUT_P)
        rec("dropout_bwd", lambda: torch.ops.aten.native_dropout_backward(d_probs, mask, scale))
        del probs, d_probs, d_scores, mask, qg, kg, vg, grad_out, d_out
        torch.cuda.empty_cache()

    if not whole:
        return rows
    # The FA2 benchmark's attention_pytorch (qkv packed as (b, s, 3, h, d)).
    qkv = torch.randn(batch, seq, 3, heads, dim, device=dev, dtype=bf, requires_grad=True)
    grad = torch.randn(batch, seq, heads, dim, device=dev, dtype=bf)

    def pytorch_attention():
        qq, kk, vv = qkv.unbind(dim=2)
        qq = qq.permute(0, 2, 1, 3).reshape(bh, seq, dim)
        kk = kk.permute(0, 2, 3, 1).reshape(bh, dim, seq)
        s = torch.empty(bh, seq, seq, dtype=bf, device=dev)
        s = torch.baddbmm(s, qq, kk, beta=0, alpha=alpha).view(batch, heads, seq, seq)
        mask = torch.triu(torch.full((seq, seq), -10000.0, device=dev), 1)
        s = s + mask.to(dtype=bf)
        att = torch.softmax(s, dim=-1)
        att = torch.nn.functional.dropout(att, 0.0)
        out = torch.einsum("bhts,bshd->bthd", att, vv)
        out.backward(grad)

    rec("pytorch_e2e", pytorch_attention)
    return rows  # the shape's tensors go with this frame


TORCH_SOFTMAX = tuple(
    (1, seq, bh, 0)
    for seq in (4096, 8192, 16384)
    for bh in (2, 4, 8, 16, 32)
    if GRID_MIN_ELEMENTS <= bh * seq * seq <= 2**32
)
"""`--torch-softmax`: calls at which Megatron-Core's FusedScaleMaskSoftmax falls back to PyTorch
(key length above 4,096: is_kernel_available), one sequence of batch x heads per rank."""


def measure_torch_softmax(torch, timed, shape, dev: str) -> list[dict]:
    """Megatron-Core's forward_torch_softmax as the training CLI configures it (bf16 scores,
    attention_softmax_in_fp32 False without --attention-softmax-in-fp32, no scale): the cached
    bool causal mask applied in place by attention_mask_func (masked_fill_ -10000), torch's
    softmax; backward: softmax's backward and masked_fill's (the gradient with the mask's
    places zeroed). Each kernel alone."""
    batch, seq, bh, _ = shape
    x = torch.randn(bh, seq, seq, device=dev, dtype=torch.bfloat16)
    mask = torch.triu(torch.ones(seq, seq, device=dev, dtype=torch.bool), diagonal=1)
    rows = []

    def rec(piece, fn):
        rows.append({"batch": batch, "seq": seq, "heads": bh, "head_dim": 0, "piece": piece,
                     "seconds": timed(fn)})  # fmt: skip

    rec("torch_mask_fwd", lambda: x.masked_fill_(mask, -10000.0))
    rec("torch_softmax_fwd", lambda: torch.softmax(x, dim=-1))
    y = torch.softmax(x, dim=-1)
    rec("torch_softmax_bwd", lambda: torch._softmax_backward_data(x, y, -1, torch.bfloat16))
    rec("torch_mask_bwd", lambda: x.masked_fill(mask, 0.0))
    return rows


def copy_seconds(torch, timed, nbytes: int, dev: str) -> float:
    """One device-to-device copy of `nbytes` (its buffers freed on return)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return timed(lambda: dst.copy_(src))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extract", nargs=2, metavar=("GIT_DIR", "OUT_DIR"))
    parser.add_argument("--kernels", help="folder written by --extract")
    parser.add_argument("--out", help="output folder")
    parser.add_argument(
        "--torch-softmax",
        action="store_true",
        help="Megatron-Core's PyTorch softmax fallback (unfused_torch_softmax.csv)",
    )
    parser.add_argument(
        "--grid", action="store_true", help="the GRID shapes, kernels alone (unfused_grid.csv)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CPU, one tiny shape, the kernel's torch reference (no figures)",
    )
    args = parser.parse_args(argv)
    if args.extract:
        extract(*args.extract)
        return 0
    if not args.out:
        parser.error("--out is required")
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = "cpu (smoke)" if args.smoke else torch.cuda.get_device_name()
    meta: dict = {"torch": torch.__version__, "gpu": gpu,
                  "cuda": torch.version.cuda, "megatron_kernels_commit": MEGATRON_KERNELS_COMMIT}  # fmt: skip
    mod = softmax_fn = None
    if args.smoke:
        mod = ReferenceSoftmax(torch)
        softmax_fn = megatron_softmax_function(torch, mod)
    elif args.kernels:
        t0 = time.time()
        try:
            prebuilt = Path(args.kernels) / "prebuilt"
            if (prebuilt / "scaled_upper_triang_masked_softmax_cuda.so").is_file():
                # a build of the same sources on another loan machine of the same image
                sys.path.insert(0, str(prebuilt))
                import scaled_upper_triang_masked_softmax_cuda as mod

                meta["megatron_kernel"] = f"prebuilt: {prebuilt}"
            else:
                mod = build_megatron_softmax(Path(args.kernels), out.parent / "megatron_build")
                meta["megatron_kernel"] = "built here"
            softmax_fn = megatron_softmax_function(torch, mod)
            meta["megatron_build_s"] = round(time.time() - t0, 1)
            meta["megatron_vs_reference_max_abs"] = check_kernel(torch, mod)
        except Exception as err:  # noqa: BLE001 - a device run reports and goes on
            meta["megatron_build_error"] = str(err)[-2000:]
            print(f"Megatron kernel not built: {str(err)[-400:]}", file=sys.stderr)
    dev = "cpu" if args.smoke else "cuda"
    timed = make_timer(torch, on_gpu=dev == "cuda")
    rows: list[dict] = []
    copy_bytes = 2**20 if args.smoke else 2**31
    copy_s = copy_seconds(torch, timed, copy_bytes, dev)
    rows.append({"batch": 0, "seq": 0, "heads": 0, "head_dim": 0, "piece": "copy",
                 "seconds": copy_s})  # fmt: skip
    meta["copy_gb_per_s_read_plus_write"] = round(2 * copy_bytes / copy_s / 1e9, 1)
    shapes = ((2, 64, 2, 16),) if args.smoke else GRID if args.grid else SHAPES
    if args.torch_softmax:
        shapes = ((2, 64, 2, 0),) if args.smoke else TORCH_SOFTMAX
    for shape in shapes:
        t0 = time.time()
        if args.torch_softmax:
            rows += measure_torch_softmax(torch, timed, shape, dev)
        else:
            rows += measure_shape(torch, timed, softmax_fn, mod, shape, dev, whole=not args.grid)
        print(f"{shape}: {time.time() - t0:.1f} s", flush=True)
    name = "unfused_grid" if args.grid else "unfused_pieces"
    name = "unfused_torch_softmax" if args.torch_softmax else name
    with open(out / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    meta["sm_clock_note"] = "clocks not pinned"
    (out / ("unfused_meta.json" if name == "unfused_pieces" else f"{name}_meta.json")).write_text(
        json.dumps(meta, indent=1) + "\n"
    )
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
