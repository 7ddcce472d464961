"""Measure the kernel shapes a model looks up (`planner measure kernels`; issue 32 item 3).

Standard library and torch only, imported inside the functions, so it runs as a script on a GPU
machine that has torch but not the planner's dependencies:

    python3 planner/calibrate/sweep.py kernels --shapes SHAPES.json [...] --out-dir DIR

SHAPES.json is what `planner measure kernels --model M --cluster C --shapes-only FILE` writes
(cost_models.kernel_shapes: the rows the cost model looks up for that model and cluster). DIR
receives the tables in the formats of ../shared/data/kernels/README.md, which `planner calibrate
--kernels DIR` reads as they are: gemm.csv, attention.csv, grouped_gemm.csv, memory_bound.csv,
plus metadata.json and README.md (device, driver, torch / CUDA / cuDNN versions, date, method,
what was skipped and why).

Method (that of ../shared/data/kernels/measure_kernels.py, with a longer timed window): the GPU is
warmed first by back-to-back 8192^3 bf16 GEMMs for `warm_s` seconds; every row is a job, and all
jobs of all kinds run in one order shuffled with a fixed seed (a run cut short by its budget is an
even sample of every kind). Each job builds its tensors (random normal), runs `warmup` calls, then
times back-to-back calls with CUDA events until they fill at least `min_time_s` (10 ms by default;
the count doubles until they do) and writes the mean. Rows are written as they are measured.

GEMMs: C[m,n] = A[m,k] B[k,n] with the operands stored as a Linear pass holds them (TN forward
Y = X W^T, NN data gradient, NT weight gradient), bf16 through torch.matmul; fp8 through
torch._scaled_mm (e4m3, per-tensor scales, bf16 out), TN only, as Hopper runs it. Grouped GEMMs:
torch._grouped_mm (bf16) and torch._scaled_grouped_mm (fp8, row-wise scales) over `experts`
equal groups, with one dense GEMM of the same total rows beside it. Attention: torch SDPA,
`fused` pinned to the cuDNN backend (the class of kernel Transformer Engine runs on Hopper), `fa2`
to the flash backend (FlashAttention-2), causal, bf16, grouped-query through enable_gqa (K/V heads
repeated where a backend refuses it; the metadata counts those); the forward alone and one
forward + backward (torch.autograd.grad, no gradient accumulation). Memory-bound ops on bf16
[tokens, width] tensors: copy, add, RMSNorm, LayerNorm, SwiGLU / GeGLU (unfused act(x) * y),
tanh-GELU, squared ReLU, MoE permute (index_select of the routed rows) and unpermute
(index_add_ back to the tokens); the per-step tail's kernels, AdamW's fused step over fp32
parameters, clip_grad_norm_'s foreach norm and scaling, and FSDP2's chunk_cat of bf16 gradients
into an fp32 buffer (`adam`, `grad_clip`, `chunk_cat`: `tokens` tensors of `width` elements).
Sliding-window cases (window > 0; torch SDPA has no windowed kernel) go to attention_window.csv
in the format of the shared one: the windowed call and, once per shape, the full causal call,
both through FlexAttention (compiled, the kernel torchtitan runs for windowed models), whose
ratio is the window's saving. A shape a kernel cannot run (a backend
without that head size, FlexAttention's backward on a CPU) is skipped and listed, never
approximated.

On CPU (`--device cpu`, a smoke test of this path) the same code runs with wall-clock timing and
SDPA's math path for every attention kernel; its rows say nothing about a GPU.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMAT = "planner-kernel-shapes/1"
KINDS = ("gemm", "grouped_gemm", "attention", "memory_bound")
COLUMNS = {
    "gemm": ("m", "n", "k", "dtype", "layout", "time_ms", "tflops"),
    "attention": (
        "batch", "seq", "heads", "kv_heads", "head_dim", "v_head_dim", "causal", "dtype",
        "kernel", "time_ms", "forward_ms",
    ),
    "grouped_gemm": (
        "experts", "rows_per_expert", "n", "k", "dtype", "time_ms", "tflops", "dense_time_ms",
    ),
    "memory_bound": ("op", "tokens", "width", "dtype", "bytes", "time_ms", "gb_per_s"),
    "attention_window": (
        "batch", "seq", "heads", "kv_heads", "head_dim", "causal", "dtype", "kernel", "window",
        "time_ms", "forward_ms",
    ),
}  # fmt: skip
"""The column order of ../shared/data/kernels/*.csv."""
MAX_REPS = 1 << 20
TINY_DIM = (16, 64)
"""--tiny: every dimension scaled into [16, 64] (a smoke test of the code path, not a table)."""
TINY_ROWS = 4


# ------------------------------------------------------------------------------- shapes


def read_shapes(paths: list[str]) -> dict[str, Any]:
    """The union of shapes files (`planner measure kernels --shapes-only`), rows deduplicated."""
    out: dict[str, Any] = {"sources": [], **{k: [] for k in KINDS}}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != FORMAT:
            raise ValueError(f"{path}: not a shapes file (format {data.get('format')!r}, "
                             f"expected {FORMAT})")
        out["sources"].append({k: data.get(k) for k in ("model", "cluster", "gpu", "seq_len",
                                                        "tps", "micro_batches", "cps", "dtypes")}
                              | {"file": str(path)})
        for kind in KINDS:
            out[kind].extend(tuple(r) for r in data.get(kind, []))
    for kind in KINDS:
        out[kind] = sorted(set(out[kind]), key=repr)
    return out


def _tiny_dim(d: int) -> int:
    lo, hi = TINY_DIM
    return max(lo, min(hi, d // 128))


def tiny_shapes(shapes: dict[str, Any]) -> dict[str, Any]:
    """A few rows of each kind with every dimension scaled into TINY_DIM (heads kept as GQA
    ratios, at most 4): a smoke test that runs in seconds on a CPU."""
    t = _tiny_dim
    out = dict(shapes)
    out["gemm"] = sorted({(t(m), t(n), t(k), d, lay) for m, n, k, d, lay in shapes["gemm"]})
    out["grouped_gemm"] = sorted(
        {(min(e, 4), t(r), t(n), t(k), d) for e, r, n, k, d in shapes["grouped_gemm"]}
    )
    att = set()
    for b, s, h, kv, dqk, dv, causal, window, kern in shapes["attention"]:
        heads = min(h, 4)
        kvh = max(1, heads * kv // h)
        att.add((1, 32, heads, kvh, min(dqk, 16), min(dv, 16), causal, min(window, 16), kern))
    out["attention"] = sorted(att, key=repr)
    out["memory_bound"] = sorted(
        {(op, t(tok), t(w), dt, 0, k) for op, tok, w, dt, _b, k in shapes["memory_bound"]},
        key=repr,
    )
    for kind in KINDS:  # an even pick of TINY_ROWS, deterministic
        rows = out[kind]
        step = max(1, len(rows) // TINY_ROWS)
        out[kind] = rows[::step][:TINY_ROWS]
    out["memory_bound"] = [_with_bytes(r) for r in out["memory_bound"]]
    return out


BYTES_PER_ELEMENT = {
    "copy": 4, "add": 6, "rmsnorm": 4, "layernorm": 4, "swiglu": 6, "geglu": 6, "gelu": 4,
    "squared_relu": 4, "moe_permute": 4, "moe_unpermute": 6, "adam": 28, "grad_clip": 12,
    "chunk_cat": 6,
}  # fmt: skip
"""bf16 bytes per [tokens, width] element (cost_models.kernel_shapes.MEMORY_BYTES_PER_ELEMENT)."""


def _with_bytes(row: tuple) -> tuple:
    op, tokens, width, dtype, _b, k = row
    return (op, tokens, width, dtype, tokens * width * BYTES_PER_ELEMENT[op], k)


# ------------------------------------------------------------------------------- timing


HOST_S_PER_CALL = 15e-6
"""The host time of one call from Python the hold covers (a kernel launch costs ~6 us of host time
on the project's H100: bench/results/h100-2026-11-26/layers/launch.csv): the GPU is held this
long per call before a timed window, at most MAX_HOLD_S (past the launch queue's depth the
kernels already queued keep the GPU busy while the host adds more)."""
MAX_HOLD_S = 0.03
SLEEP_CYCLES_PER_S = 2.0e9
"""torch.cuda._sleep counts GPU clock cycles; at most ~2 GHz on the GPUs here, so a hold of
cycles / 2e9 s lasts at least that long."""


def make_timer(device: str, min_time_s: float, warmup: int) -> Callable[[Callable], float]:
    """Mean seconds of fn() over back-to-back calls filling at least min_time_s, after `warmup`
    calls: CUDA events on a GPU, the wall clock elsewhere.

    On a GPU the stream is first held by a sleep kernel (torch.cuda._sleep) for about the time
    the host needs to launch the window's calls, so the calls queue up behind it and the events
    time the kernels back to back, not Python's launch rate: a kernel of a few microseconds
    would otherwise be timed at the host's pace (what the cost model's launch-overhead term
    prices separately), and vary with the host's load."""
    import torch

    on_gpu = torch.device(device).type == "cuda"
    hold = getattr(torch.cuda, "_sleep", None)

    def window(fn: Callable, reps: int) -> float:
        if on_gpu:
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
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return time.perf_counter() - t0

    def timed(fn: Callable) -> float:
        for _ in range(warmup):
            fn()
        one = max(window(fn, 1), 1e-7)
        reps = max(2, math.ceil(min_time_s / one))
        total = window(fn, reps)
        while total < min_time_s and reps < MAX_REPS:  # one call was slower than a call in a row
            reps = min(MAX_REPS, reps * 2)
            total = window(fn, reps)
        return total / reps

    return timed


# ------------------------------------------------------------------------------- kernels


def _gemm_call(torch: Any, dev: str, m: int, n: int, k: int, dtype: str, layout: str):
    bf = torch.bfloat16
    if dtype == "fp8":  # TN: A (m, k) row-major, B (n, k) transposed to column-major
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=bf)
    if layout == "TN":  # Y = X W^T: X (m, k), W (n, k)
        a, b = torch.randn(m, k, device=dev, dtype=bf), torch.randn(n, k, device=dev, dtype=bf).t()
    elif layout == "NN":  # dX = dY W: both row-major
        a, b = torch.randn(m, k, device=dev, dtype=bf), torch.randn(k, n, device=dev, dtype=bf)
    else:  # NT, dW = dY^T X: A = dY^T with dY (k tokens, m) row-major
        a, b = torch.randn(k, m, device=dev, dtype=bf).t(), torch.randn(k, n, device=dev, dtype=bf)
    return lambda: torch.matmul(a, b)


def run_gemm(torch: Any, dev: str, timed: Callable, row: tuple) -> list:
    m, n, k, dtype, layout = row
    seconds = timed(_gemm_call(torch, dev, m, n, k, dtype, layout))
    return [m, n, k, dtype, layout, f"{seconds * 1e3:.5f}", f"{2 * m * n * k / seconds / 1e12:.2f}"]


def _grouped_call(torch: Any, dev: str, e: int, r: int, n: int, k: int, dtype: str):
    bf = torch.bfloat16
    offs = torch.arange(1, e + 1, device=dev, dtype=torch.int32) * r
    if dtype == "fp8":
        a = torch.randn(e * r, k, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(e, n, k, device=dev).to(torch.float8_e4m3fn)
        sa = torch.ones(e * r, device=dev, dtype=torch.float32)
        sb = torch.ones(e, n, device=dev, dtype=torch.float32)
        return lambda: torch._scaled_grouped_mm(
            a, w.transpose(-2, -1), sa, sb, offs=offs, out_dtype=bf
        )
    a = torch.randn(e * r, k, device=dev, dtype=bf)
    w = torch.randn(e, n, k, device=dev, dtype=bf)
    return lambda: torch._grouped_mm(a, w.transpose(-2, -1), offs=offs, out_dtype=bf)


def run_grouped(torch: Any, dev: str, timed: Callable, row: tuple) -> list:
    e, r, n, k, dtype = row
    seconds = timed(_grouped_call(torch, dev, e, r, n, k, dtype))
    dense = timed(_gemm_call(torch, dev, e * r, n, k, dtype, "TN"))
    tflops = 2 * e * r * n * k / seconds / 1e12
    return [e, r, n, k, dtype, f"{seconds * 1e3:.5f}", f"{tflops:.2f}", f"{dense * 1e3:.5f}"]


def _sdpa_context(torch: Any, on_gpu: bool, kernel: str):
    import contextlib

    if not on_gpu:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cudnn = SDPBackend.CUDNN_ATTENTION
    return sdpa_kernel([cudnn if kernel == "fused" else SDPBackend.FLASH_ATTENTION])


def _attention_calls(torch: Any, dev: str, row: tuple, notes: dict):
    """(forward, forward + backward) callables of one attention case."""
    import torch.nn.functional as F

    b, s, h, kv, dqk, dv, causal, _window, _kern = row
    on_gpu = torch.device(dev).type == "cuda"
    dt = torch.bfloat16

    def t(heads: int, d: int):
        return torch.randn(b, heads, s, d, device=dev, dtype=dt, requires_grad=True)

    q, k, v = t(h, dqk), t(kv, dqk), t(kv, dv)
    grad = torch.randn(b, h, s, dv, device=dev, dtype=dt)
    gqa = {"enable_gqa": True} if kv != h else {}

    def fwd():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

    try:
        fwd()
    except RuntimeError:
        if not gqa:
            raise
        # A backend without grouped-query support: the same work on K/V heads repeated.
        k = k.detach().repeat_interleave(h // kv, 1).requires_grad_()
        v = v.detach().repeat_interleave(h // kv, 1).requires_grad_()
        gqa = {}
        fwd()
        notes["gqa_expanded"] = notes.get("gqa_expanded", 0) + 1

    def both():
        return torch.autograd.grad(fwd(), (q, k, v), grad)

    return fwd, both


def run_attention(torch: Any, dev: str, timed: Callable, row: tuple, notes: dict) -> list:
    b, s, h, kv, dqk, dv, causal, _window, kern = row
    with _sdpa_context(torch, torch.device(dev).type == "cuda", kern):
        fwd, both = _attention_calls(torch, dev, row, notes)
        fwd_s = timed(fwd)
        total_s = timed(both)
    return [b, s, h, kv, dqk, dv, "true" if causal else "false", "bf16", kern,
            f"{total_s * 1e3:.5f}", f"{fwd_s * 1e3:.5f}"]  # fmt: skip


_FLEX: dict[str, Any] = {}
"""The compiled FlexAttention of this process (one compile; torch caches per shape)."""


def _flex_calls(torch: Any, dev: str, row: tuple, window: int):
    """(forward, forward + backward) of FlexAttention on this case with a causal mask, and a
    sliding window of `window` keys (query i sees keys (i - window, i]) where window > 0."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    b, s, h, kv, dqk, dv, _causal, _w, _kern = row
    on_gpu = torch.device(dev).type == "cuda"
    if "flex" not in _FLEX:  # compiled on a GPU, as torchtitan runs it; eager elsewhere
        _FLEX["flex"] = torch.compile(flex_attention, dynamic=False) if on_gpu else flex_attention
    flex = _FLEX["flex"]
    if window:
        def mask(_b, _h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & (q_idx - kv_idx < window)
    else:
        def mask(_b, _h, q_idx, kv_idx):
            return q_idx >= kv_idx
    block = create_block_mask(mask, B=None, H=None, Q_LEN=s, KV_LEN=s, device=dev)
    dt = torch.bfloat16

    def t(heads: int, d: int):
        return torch.randn(b, heads, s, d, device=dev, dtype=dt, requires_grad=True)

    q, k, v = t(h, dqk), t(kv, dqk), t(kv, dv)
    grad = torch.randn(b, h, s, dv, device=dev, dtype=dt)

    def fwd():
        return flex(q, k, v, block_mask=block, enable_gqa=kv != h)

    def both():
        return torch.autograd.grad(fwd(), (q, k, v), grad)

    return fwd, both


def run_window(torch: Any, dev: str, timed: Callable, row: tuple, done: set) -> list:
    """attention_window.csv rows (../shared/data/kernels format) of a sliding-window case: the
    windowed call and the full causal call of the same shape, both through FlexAttention (torch
    SDPA has no windowed kernel; the saving is the ratio of the two, which is what the cost
    model reads from these rows), each once per run (`done`: the cases of either attention
    kernel label run the same FlexAttention call)."""
    b, s, h, kv, dqk, dv, causal, window, _kern = row
    if not causal or dqk != dv:
        raise SkipShape(f"sliding window {window}: measured causal with equal head dims only")
    out = []
    shape = (b, s, h, kv, dqk)
    for w in (0, window):
        if (shape, w) in done:
            continue
        fwd, both = _flex_calls(torch, dev, row, w)
        fwd_s, total_s = timed(fwd), timed(both)
        out.append([b, s, h, kv, dqk, "true", "bf16", "flex", w or "",
                    f"{total_s * 1e3:.5f}", f"{fwd_s * 1e3:.5f}"])  # fmt: skip
        done.add((shape, w))
    return out


def _adam_call(torch: Any, dev: str, tensors: int, width: int):
    """One AdamW step over `tensors` fp32 parameters of `width` elements with fp32 gradients:
    torch.optim.AdamW(fused=True), the multi-tensor kernel torchtitan's optimizer runs
    (aten::_fused_adamw_; the first, warm-up call creates the two moments)."""
    params = [torch.randn(width, device=dev, dtype=torch.float32) for _ in range(tensors)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-6, fused=True)
    return opt.step


def _chunk_cat_call(torch: Any, dev: str, tensors: int, width: int):
    """FSDP2's reduce-scatter copy-in (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
    foreach_reduce_scatter_copy_in): torch._chunk_cat of `tensors` bf16 gradients of `width`
    elements into one fp32 buffer (one chunk: the one-GPU shard group)."""
    grads = [torch.randn(width, device=dev, dtype=torch.bfloat16) for _ in range(tensors)]
    out = torch.empty(1, tensors * width, device=dev, dtype=torch.float32)
    return lambda: torch._chunk_cat(grads, 0, 1, out=out)


def _clip_call(torch: Any, dev: str, tensors: int, width: int):
    """The gradient clip over `tensors` fp32 gradients of `width` elements:
    torch.nn.utils.clip_grad_norm_(foreach=True), the global norm (_foreach_norm) and the
    scaling by the clamped coefficient (_foreach_mul_, run whatever the coefficient)."""
    params = [torch.randn(width, device=dev, dtype=torch.float32) for _ in range(tensors)]
    for p in params:
        p.grad = torch.randn_like(p)
    return lambda: torch.nn.utils.clip_grad_norm_(params, max_norm=1.0, foreach=True)


STEP_TAIL = {"adam": _adam_call, "grad_clip": _clip_call, "chunk_cat": _chunk_cat_call}
"""The per-step tail's memory-bound kernels (cost_models.kernel_shapes.STEP_TAIL_ROWS): `tokens`
is the tensors of one multi-tensor call, `width` their length."""


def _memory_call(torch: Any, dev: str, op: str, tokens: int, width: int, top_k: int):
    import torch.nn.functional as F

    if op in STEP_TAIL:
        return STEP_TAIL[op](torch, dev, tokens, width)
    bf = torch.bfloat16
    x = torch.randn(tokens, width, device=dev, dtype=bf)
    y = torch.randn_like(x)
    w = torch.ones(width, device=dev, dtype=bf)
    calls = {
        "copy": lambda: x.clone(),
        "add": lambda: x + y,
        "rmsnorm": lambda: F.rms_norm(x, (width,), w),
        "layernorm": lambda: F.layer_norm(x, (width,), w),
        "swiglu": lambda: F.silu(x) * y,
        "geglu": lambda: F.gelu(x, approximate="tanh") * y,
        "gelu": lambda: F.gelu(x, approximate="tanh"),
        "squared_relu": lambda: torch.relu(x).square(),
    }
    if op in calls:
        return calls[op]
    if op not in ("moe_permute", "moe_unpermute"):
        raise SkipShape(f"no kernel for memory-bound op {op!r}")
    # `tokens` routed rows (top_k per token): src[i] is the token routed row i came from,
    # ordered by expert as a dispatcher sorts them (a random permutation stands for the router).
    src = torch.randperm(tokens, device=dev) // top_k
    source = torch.randn(tokens // top_k, width, device=dev, dtype=bf)
    if op == "moe_permute":
        return lambda: source.index_select(0, src)
    return lambda: source.index_add_(0, src, x)


def run_memory(torch: Any, dev: str, timed: Callable, row: tuple) -> list:
    op, tokens, width, dtype, nbytes, top_k = row
    seconds = timed(_memory_call(torch, dev, op, tokens, width, top_k))
    rate = f"{nbytes / seconds / 1e9:.1f}"
    return [op, tokens, width, dtype, nbytes, f"{seconds * 1e3:.5f}", rate]


class SkipShape(Exception):
    """A shape this machine has no kernel for (listed in metadata.json, never approximated)."""


# ------------------------------------------------------------------------------- the run


def _warm(torch: Any, dev: str, seconds: float, on_gpu: bool) -> float | None:
    """Back-to-back large bf16 GEMMs for `seconds` (clocks and power at their steady level),
    then the reference 8192^3 TFLOP/s of the README table."""
    if not on_gpu or seconds <= 0:
        return None
    call = _gemm_call(torch, dev, 8192, 8192, 8192, "bf16", "TN")
    stop = time.time() + seconds
    while time.time() < stop:
        for _ in range(10):
            call()
        torch.cuda.synchronize()
    seconds_per = make_timer(dev, 0.2, 1)(call)
    return 2 * 8192**3 / seconds_per / 1e12


SUSTAINED_COLUMNS = (
    "workload", "t_s", "tflops", "sm_clock_mhz", "power_w", "temp_c", "throttle_reasons",
)  # fmt: skip
"""../shared/data/kernels/sustained.csv (measure_sustained.py)."""
SMI_QUERY = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def _smi(query: str) -> list[str]:
    """One nvidia-smi query of the first GPU, or blanks where it cannot run."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=False,
        ).stdout  # fmt: skip
        return [x.strip() for x in out.strip().splitlines()[0].split(",")]
    except (OSError, IndexError, subprocess.SubprocessError):
        return [""] * len(query.split(","))


SUSTAINED_FILES = {"bf16": "sustained.csv", "fp8": "sustained_fp8.csv"}
"""What models_zoo.kernel_tables reads as the bf16 / fp8 sustained rates."""


def sustained(torch: Any, dev: str, seconds: float, out: Path, dtype: str = "bf16") -> int:
    """Back-to-back 8192^3 GEMMs of `dtype` for `seconds`, one row per 2-second window with the
    SM clock, power, temperature and throttle reasons nvidia-smi reads at its end (the method of
    ../shared/data/kernels/measure_sustained.py and bench/measure_sustained_fp8.py, their
    square-8192 workload), in SUSTAINED_FILES[dtype]: the rate the GPU holds under its power
    cap, which `calibrate` caps that dtype's GEMM look-ups at."""
    call = _gemm_call(torch, dev, 8192, 8192, 8192, dtype, "TN")
    call()  # a GPU without this GEMM fails here, before its file exists
    flops, rows, t0 = 2 * 8192**3, 0, time.time()
    with open(out / SUSTAINED_FILES[dtype], "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(SUSTAINED_COLUMNS)
        while time.time() - t0 < seconds or rows < 2:  # the reader skips the first window
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            reps, stop = 0, time.time() + 2.0
            start.record()
            while time.time() < stop:
                call()
                reps += 1
                if reps % 20 == 0:
                    torch.cuda.synchronize()
            end.record()
            end.synchronize()
            tflops = flops * reps / (start.elapsed_time(end) / 1e3) / 1e12
            t_s = f"{time.time() - t0:.1f}"
            w.writerow(["square-8192", t_s, f"{tflops:.1f}", *_smi(SMI_QUERY)])
            f.flush()
            rows += 1
    return rows


def device_info(torch: Any, dev: str) -> dict[str, Any]:
    """What the README table of ../shared/data/kernels names: device, driver, software."""
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": sys.version.split()[0],
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
    }
    if torch.device(dev).type != "cuda":
        return {**info, "device": "CPU (smoke test: SDPA math path, wall-clock timing)"}
    p = torch.cuda.get_device_properties(dev)
    info.update(
        device=p.name,
        sms=p.multi_processor_count,
        memory_gib=round(p.total_memory / 2**30, 1),
        capability=".".join(map(str, torch.cuda.get_device_capability(dev))),
    )
    query = "driver_version,power.limit,clocks.max.sm"
    try:
        smi = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
        first = smi.stdout.strip().splitlines()[0].split(", ")
        info.update(dict(zip(("driver", "power_limit", "max_sm_clock"), first, strict=False)))
    except (OSError, IndexError, subprocess.SubprocessError) as exc:
        info["driver"] = f"unknown ({exc.__class__.__name__})"
    return info


class Sheets:
    """One CSV per table kind, opened on its first row and flushed row by row."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir, self.files, self.writers = out_dir, {}, {}
        self.rows = dict.fromkeys(COLUMNS, 0)

    def write(self, kind: str, row: list) -> None:
        if kind not in self.writers:
            path = self.out_dir / f"{kind}.csv"
            f = open(path, "w", newline="", encoding="utf-8")  # noqa: SIM115 (held open)
            self.files[kind], self.writers[kind] = f, csv.writer(f, lineterminator="\n")
            self.writers[kind].writerow(COLUMNS[kind])
        self.writers[kind].writerow(row)
        self.files[kind].flush()
        self.rows[kind] += 1

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def _jobs(shapes: dict[str, Any], seed: int) -> list[tuple[str, tuple]]:
    jobs = [(kind, tuple(r)) for kind in KINDS for r in shapes[kind]]
    random.Random(seed).shuffle(jobs)
    return jobs


def _run_job(
    torch: Any, dev: str, timed: Callable, kind: str, row: tuple, notes: dict, full_done: set
) -> list[tuple[str, list]]:
    """(table, row) pairs a job writes: one row, or a windowed case's attention_window rows."""
    if kind == "gemm":
        return [(kind, run_gemm(torch, dev, timed, row))]
    if kind == "grouped_gemm":
        return [(kind, run_grouped(torch, dev, timed, row))]
    if kind == "attention" and row[7]:
        return [("attention_window", r) for r in run_window(torch, dev, timed, row, full_done)]
    if kind == "attention":
        return [(kind, run_attention(torch, dev, timed, row, notes))]
    return [(kind, run_memory(torch, dev, timed, row))]


def measure(
    shapes: dict[str, Any],
    out_dir: str | Path,
    *,
    device: str = "cuda",
    min_time_s: float = 0.010,
    warmup: int = 2,
    warm_s: float = 2.0,
    seed: int = 0,
    budget_s: float | None = None,
    sustained_s: float = 0.0,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Measure every row of `shapes` (read_shapes) into `out_dir`, then (on a GPU, when
    `sustained_s` > 0) the sustained bf16 GEMM rate; returns the metadata written to
    metadata.json (module docstring: method)."""
    import torch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    on_gpu = torch.device(device).type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(seed)
    t0 = time.time()
    reference = _warm(torch, device, warm_s, on_gpu)
    timed = make_timer(device, min_time_s, warmup)
    sheets, notes, skipped, left = Sheets(out), {}, [], 0
    full_done: set[tuple] = set()  # (shape, window) FlexAttention rows written
    jobs = _jobs(shapes, seed)
    for i, (kind, row) in enumerate(jobs):
        if budget_s is not None and time.time() - t0 > budget_s:
            left = len(jobs) - i
            log(f"budget of {budget_s:g} s spent: {left} shapes not measured")
            break
        try:
            for table, written in _run_job(torch, device, timed, kind, row, notes, full_done):
                sheets.write(table, written)
        except SkipShape as exc:
            skipped.append({"kind": kind, "row": list(row), "reason": str(exc)})
        except (RuntimeError, ValueError, NotImplementedError) as exc:  # no kernel here
            first = (str(exc).splitlines() or [""])[0][:160]
            reason = f"{exc.__class__.__name__}: {first}"
            skipped.append({"kind": kind, "row": list(row), "reason": reason})
        if on_gpu and i % 50 == 49:
            torch.cuda.empty_cache()
        if i % 100 == 99:
            log(f"{i + 1} of {len(jobs)} shapes, {time.time() - t0:.0f} s")
    sheets.close()
    windows: dict[str, int | str] = {}
    for dtype in ("bf16", "fp8") if on_gpu and sustained_s > 0 else ():
        try:
            windows[dtype] = sustained(torch, device, sustained_s, out, dtype)
        except (RuntimeError, OSError) as exc:  # the tables above are written already
            windows[dtype] = f"failed: {exc.__class__.__name__}: {str(exc)[:160]}"
    meta = {
        **device_info(torch, device),
        "reference_8192_bf16_tflops": None if reference is None else round(reference, 1),
        "method": {"min_time_ms": min_time_s * 1e3, "warmup_calls": warmup, "warm_s": warm_s,
                   "seed": seed, "timing": "CUDA events" if on_gpu else "wall clock"},
        "tiny": bool(shapes.get("tiny")),
        "sources": shapes.get("sources", []),
        "rows": sheets.rows,
        "asked": {k: len(shapes[k]) for k in KINDS},
        "not_measured_budget": left,
        "sustained_windows": windows,
        "skipped": skipped,
        "notes": notes,
        "wall_s": round(time.time() - t0, 1),
    }  # fmt: skip
    write_metadata(out, meta)
    return meta


def write_metadata(out: Path, meta: dict[str, Any]) -> None:
    """metadata.json (everything) and a short README.md in the words of the shared tables'."""
    (out / "metadata.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    models = ", ".join(
        f"{s.get('model')} on {s.get('cluster')} (seq {s.get('seq_len')}, TP {s.get('tps')}, "
        f"micro-batches {s.get('micro_batches')}, CP {s.get('cps')}, {s.get('dtypes')})"
        for s in meta["sources"]
    )
    ref = meta["reference_8192_bf16_tflops"]
    lines = [
        "# Kernel tables measured by `planner measure kernels`",
        "",
        ("**Smoke test (--tiny): toy shapes, not a table to calibrate from.**\n"
         if meta["tiny"] else "") +
        f"Device: {meta['device']}; driver {meta.get('driver', '-')}; torch {meta['torch']}, "
        f"CUDA {meta['cuda']}, cuDNN {meta['cudnn']}; measured {meta['date_utc']} UTC"
        + (f"; reference 8192^3 bf16 GEMM {ref} TFLOP/s." if ref else "."),
        "",
        f"Shapes: those the cost model looks up for {models} (cost_models/kernel_shapes.py).",
        "",
        f"Method: GPU warmed {meta['method']['warm_s']} s by 8192^3 bf16 GEMMs; shapes in one "
        f"order shuffled with seed {meta['method']['seed']}; each warmed by "
        f"{meta['method']['warmup_calls']} calls, then timed ({meta['method']['timing']}) over "
        f"back-to-back calls filling at least {meta['method']['min_time_ms']:g} ms; the mean. "
        "Formats: ../shared/data/kernels/README.md (planner/calibrate/kernel_sweep.py says how "
        "each kernel is called).",
        "",
        "Rows: " + ", ".join(f"{k} {meta['rows'][k]} of {n}" for k, n in meta["asked"].items())
        + f", attention_window {meta['rows']['attention_window']} (FlexAttention)"
        + f"; skipped {len(meta['skipped'])} (metadata.json says why); "
        f"{meta['not_measured_budget']} left unmeasured by the time budget. "
        f"Wall time {meta['wall_s']} s."
        + "".join(
            f" Then {n} 2-second windows of back-to-back 8192^3 {d} GEMMs "
            f"({SUSTAINED_FILES[d]}: the rate under the power cap)."
            for d, n in meta["sustained_windows"].items() if isinstance(n, int)
        ),
        "",
        "Use: `planner calibrate --cluster C --kernels THIS_FOLDER --out calibrated.yaml`.",
    ]  # fmt: skip
    (out / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Script entry: `sweep.py kernels --shapes FILE.json [FILE.json ...] --out-dir DIR`."""
    import argparse

    p = argparse.ArgumentParser(prog="sweep.py kernels", description=__doc__.split("\n")[0])
    p.add_argument("--shapes", nargs="+", required=True, metavar="FILE.json")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="a few toy shapes (smoke test)")
    p.add_argument("--min-time-ms", type=float, default=10.0)
    p.add_argument("--warm-s", type=float, default=2.0)
    p.add_argument("--budget-s", type=float, help="stop measuring after this many seconds")
    p.add_argument(
        "--sustained-s", type=float, default=0.0,
        help="then this many seconds each of 8192^3 bf16 and fp8 GEMMs in 2-s windows "
        "(sustained.csv, sustained_fp8.csv; GPU only)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    shapes = read_shapes(a.shapes)
    if a.tiny:
        shapes = {**tiny_shapes(shapes), "tiny": True}
    meta = measure(
        shapes, a.out_dir, device=a.device, min_time_s=a.min_time_ms / 1e3,
        warm_s=0.0 if a.tiny else a.warm_s, seed=a.seed, budget_s=a.budget_s,
        sustained_s=0.0 if a.tiny else a.sustained_s,
        log=lambda s: sys.stderr.write(s + "\n"),
    )  # fmt: skip
    rows = ", ".join(f"{k} {n}" for k, n in meta["rows"].items())
    sys.stdout.write(
        f"{rows} rows -> {a.out_dir} ({meta['device']}, {meta['wall_s']} s; "
        f"{len(meta['skipped'])} skipped, {meta['not_measured_budget']} over budget)\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
