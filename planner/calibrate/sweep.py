"""GEMM and attention sweeps on the local GPU (`planner measure`; needs the [measure] extra, torch).

This module imports only the standard library at load time and torch inside the functions, so it
also runs as a script on a machine that has torch but not the planner's dependencies:
``python3 planner/calibrate/sweep.py gemm --out gemm.csv`` (what docs/calibration.md ran on H100).

Rows are what `planner calibrate --gemm / --attention` read (CONTRACT.md "Calibration"):
GEMM ``m,n,k,dtype,tflops``; attention ``batch,seq,heads,kv_heads,head_dim,causal,dtype,kernel,
time_ms,tflops`` with time_ms the forward + backward of one call and tflops counted the way
FlashAttention's benchmarks count them: forward 4*b*s^2*h*d (halved when causal), backward 2.5x
forward (Dao 2023, FlashAttention-2, benchmarks/benchmark_flash_attention.py).
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

GEMM_FIELDS = ("m", "n", "k", "dtype", "tflops")
ATTENTION_FIELDS = (
    "batch",
    "seq",
    "heads",
    "kv_heads",
    "head_dim",
    "causal",
    "dtype",
    "kernel",
    "time_ms",
    "tflops",
)

# Square roll-off plus the shapes a 8B-70B Llama layer runs (tokens x hidden x ffn after TP 1-8).
DEFAULT_GEMM_SHAPES: tuple[tuple[int, int, int], ...] = (
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 1024, 8192),
    (8192, 4096, 4096),
    (8192, 6144, 4096),
    (8192, 14336, 4096),
    (8192, 4096, 14336),
    (8192, 10240, 8192),
    (8192, 8192, 3584),
    (8192, 3584, 8192),
    (16384, 8192, 8192),
    (4096, 28672, 8192),
    (4096, 8192, 28672),
    (2048, 7168, 1024),
)
DEFAULT_ATTENTION: tuple[tuple[int, int, int, int, int], ...] = (
    # batch, seq, heads, kv_heads, head_dim
    (8, 1024, 32, 32, 128),
    (4, 2048, 32, 32, 128),
    (2, 4096, 32, 32, 128),
    (1, 8192, 32, 32, 128),
    (1, 8192, 64, 8, 128),
    (1, 16384, 16, 16, 128),
)
TINY_GEMM_SHAPES = ((32, 32, 32), (64, 64, 64), (128, 64, 32))
TINY_ATTENTION = ((1, 64, 2, 2, 16), (1, 128, 2, 1, 16))


def _timer(device: Any) -> Callable[[Callable[[], Any], int, int], float]:
    """Median seconds of fn() over `iters` after `warmup` calls (CUDA events on a GPU)."""
    import torch

    def cuda_time(fn: Callable[[], Any], warmup: int, iters: int) -> float:
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)

    def cpu_time(fn: Callable[[], Any], warmup: int, iters: int) -> float:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return cuda_time if torch.device(device).type == "cuda" else cpu_time


def gemm_sweep(
    shapes: Iterable[tuple[int, int, int]] = DEFAULT_GEMM_SHAPES,
    dtypes: Sequence[str] = ("bf16", "fp8"),
    device: str = "cuda",
    warmup: int = 5,
    iters: int = 20,
) -> list[dict[str, Any]]:
    """TFLOP/s of [m, k] x [k, n] per shape and dtype. fp8 runs torch._scaled_mm (e4m3, per-tensor
    scales, bf16 out) and is skipped where the device has no fp8 GEMM (CPU, pre-Hopper)."""
    import torch

    timed = _timer(device)
    rows = []
    for dtype in dtypes:
        if dtype == "fp8" and not _has_fp8(device):
            continue
        for m, n, k in shapes:
            gen = torch.Generator(device=device).manual_seed(0)
            a = torch.randn(m, k, device=device, generator=gen)
            b = torch.randn(n, k, device=device, generator=gen)
            if dtype == "bf16":
                a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16).t()
                fn: Callable[[], Any] = lambda a16=a16, b16=b16: a16 @ b16
            else:
                a8 = a.to(torch.float8_e4m3fn)
                b8 = b.to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm needs
                one = torch.ones((), device=device)
                fn = lambda a8=a8, b8=b8, one=one: torch._scaled_mm(
                    a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                )
            seconds = timed(fn, warmup, iters)
            rows.append(
                {"m": m, "n": n, "k": k, "dtype": dtype, "tflops": 2 * m * n * k / seconds / 1e12}
            )
    return rows


def _has_fp8(device: str) -> bool:
    import torch

    if torch.device(device).type != "cuda" or not hasattr(torch, "float8_e4m3fn"):
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def attention_flops(batch: int, seq: int, heads: int, head_dim: int, causal: bool) -> float:
    """Forward + backward FLOPs of one attention call, FlashAttention's benchmark convention."""
    forward = 4.0 * batch * seq * seq * heads * head_dim / (2 if causal else 1)
    return 3.5 * forward


def attention_sweep(
    configs: Iterable[tuple[int, int, int, int, int]] = DEFAULT_ATTENTION,
    kernels: Sequence[str] = ("fa2", "fused"),
    device: str = "cuda",
    warmup: int = 3,
    iters: int = 10,
) -> list[dict[str, Any]]:
    """Causal bf16 attention forward + backward through torch SDPA. `fa2` pins SDPA's flash
    backend (FlashAttention-2), `fused` the cuDNN backend (the class of kernel Transformer Engine
    runs on Hopper); a kernel the device lacks is skipped. On CPU both run SDPA's math path."""
    import torch
    import torch.nn.functional as F

    timed = _timer(device)
    on_gpu = torch.device(device).type == "cuda"
    dtype = torch.bfloat16 if on_gpu else torch.float32
    if not on_gpu:  # SDPA's math path in fp32: a smoke test, not a kernel class to calibrate
        kernels = ("math",)
    rows = []
    for kernel in kernels:
        for batch, seq, heads, kv_heads, head_dim in configs:
            gen = torch.Generator(device=device).manual_seed(0)
            q = torch.randn(batch, heads, seq, head_dim, device=device, generator=gen, dtype=dtype)
            kv_shape = (batch, kv_heads, seq, head_dim)
            k = torch.randn(*kv_shape, device=device, generator=gen, dtype=dtype)
            v = torch.randn(*kv_shape, device=device, generator=gen, dtype=dtype)
            if kv_heads != heads:  # expand GQA K/V: every backend takes equal heads
                k = k.repeat_interleave(heads // kv_heads, dim=1)
                v = v.repeat_interleave(heads // kv_heads, dim=1)
            for t in (q, k, v):
                t.requires_grad_(True)
            grad = torch.randn_like(q)

            def step(q=q, k=k, v=v, grad=grad) -> None:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                out.backward(grad)

            try:
                with _sdpa_backend(kernel if on_gpu else None):
                    seconds = timed(step, warmup, iters)
            except RuntimeError:  # backend not available for this shape / device
                continue
            flops = attention_flops(batch, seq, heads, head_dim, causal=True)
            rows.append(
                {
                    "batch": batch,
                    "seq": seq,
                    "heads": heads,
                    "kv_heads": kv_heads,
                    "head_dim": head_dim,
                    "causal": "true",
                    "dtype": "bf16" if on_gpu else "fp32",
                    "kernel": kernel,
                    "time_ms": seconds * 1e3,
                    "tflops": flops / seconds / 1e12,
                }
            )
    return rows


def _sdpa_backend(kernel: str | None) -> Any:
    import contextlib

    if kernel is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = SDPBackend.FLASH_ATTENTION if kernel == "fa2" else SDPBackend.CUDNN_ATTENTION
    return sdpa_kernel([backend])


def write_csv(rows: list[dict[str, Any]], fields: Sequence[str], path: str | Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def device_description(device: str) -> str:
    import torch

    if torch.device(device).type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"{name}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    return f"CPU, torch {torch.__version__}"


def main(argv: list[str] | None = None) -> int:
    """Script entry: `sweep.py {gemm,attention} --out CSV [--device D] [--tiny]`, or
    `sweep.py kernels --shapes FILE.json --out-dir DIR` (kernel_sweep.main)."""
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["kernels"]:
        try:
            from . import kernel_sweep
        except ImportError:  # run as a script (python3 planner/calibrate/sweep.py)
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            import kernel_sweep  # type: ignore[no-redef]
        return kernel_sweep.main(argv[1:])

    p = argparse.ArgumentParser(prog="sweep.py")
    p.add_argument("what", choices=("gemm", "attention", "kernels"))
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args(argv)
    if a.what == "gemm":
        rows = gemm_sweep(TINY_GEMM_SHAPES if a.tiny else DEFAULT_GEMM_SHAPES, device=a.device)
        write_csv(rows, GEMM_FIELDS, a.out)
    else:
        rows = attention_sweep(TINY_ATTENTION if a.tiny else DEFAULT_ATTENTION, device=a.device)
        write_csv(rows, ATTENTION_FIELDS, a.out)
    sys.stdout.write(f"{len(rows)} rows -> {a.out} ({device_description(a.device)})\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
