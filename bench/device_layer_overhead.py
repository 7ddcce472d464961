"""Whole transformer layers, timed forward + backward on one GPU, beside the launch cost of a kernel.

What the kernel tables cannot say: how much a real layer's step takes beyond the sum of its
kernels (launch and CPU overhead, the small elementwise kernels between GEMMs, allocator work),
and how much CUDA graphs take back. This script measures, on the GPU it runs on:

- ``launch.csv``: the wall time of one tiny kernel launched eagerly from Python, and replayed
  from a CUDA graph (N back-to-back ``add_`` on a 1-element tensor, timed by the host clock);
- ``layers.csv``: one decoder layer (RMSNorm, QKV, RoPE-free causal GQA attention through the
  cuDNN backend of ``scaled_dot_product_attention``, output projection, residual, RMSNorm,
  SwiGLU FFN or a top-k MoE FFN through ``torch._grouped_mm``) of real models' per-TP-rank
  shapes, forward + backward, eager and (dense layers) through ``torch.cuda.make_graphed_callables``,
  timed with CUDA events over at least ``--min-ms`` of back-to-back steps and by the host clock.

The shapes' kernels are those of ``../shared/data/kernels`` (same GEMMs, same attention kernel),
and ``bench/layer_time_vs_measured.py`` compares each layer with the Pricer's time for it.
Imports only the standard library and torch: ``python3 bench/device_layer_overhead.py --out DIR``.
``--device cpu --tiny`` is a smoke test of the code path (no timing meaning).
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import time

import torch
import torch.nn.functional as F

# name: hidden, heads, kv heads, head dim, ffn (per expert for MoE), experts, top-k, TP degrees
DENSE = {
    "llama3-8b": (4096, 32, 8, 128, 14336, 0, 0, (1, 2, 4, 8)),
    "llama3-70b": (8192, 64, 8, 128, 28672, 0, 0, (2, 4, 8)),
}
# Qwen3-30B-A3B: 2,048 hidden, 32 query / 4 KV heads of 128, 128 experts of 768, top-8 (HF config).
MOE = {"qwen3-30b-a3b": (2048, 32, 4, 128, 768, 128, 8, (1, 2, 4))}
# (micro-batch, sequence): 16,384-token cases match the shared tables' attention rows (batch =
# 16,384 / seq); the 4,096-token case is where launch overhead shows.
SHAPES = ((8, 2048), (2, 8192), (1, 4096))
TINY = {"tiny": (64, 4, 2, 16, 128, 0, 0, (1, 2)), "tiny-moe": (64, 4, 2, 16, 32, 8, 2, (1,))}


def timed_cuda(fn, min_s: float) -> tuple[float, float, int]:
    """(mean CUDA-event seconds, mean host seconds, reps) over enough calls to fill min_s."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    one = max(s.elapsed_time(e) / 1e3, time.perf_counter() - t, 1e-6)
    reps = max(5, min(200, int(min_s / one) + 1))
    t = time.perf_counter()
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t) / reps
    return s.elapsed_time(e) / 1e3 / reps, host, reps


def timed_cpu(fn, min_s: float) -> tuple[float, float, int]:
    fn()
    t = time.perf_counter()
    fn()
    reps = 2
    fn()
    host = (time.perf_counter() - t) / reps
    return host, host, reps


class Layer(torch.nn.Module):
    """One decoder layer's per-rank work: the shapes a TP rank runs (heads / TP, ffn / TP)."""

    def __init__(self, h, nh, kv, hd, ffn, experts, topk, tp, dev, dtype):
        super().__init__()
        self.nh, self.kv, self.hd, self.topk, self.experts = (
            nh // tp,
            max(kv // tp, 1),
            hd,
            topk,
            experts,
        )
        p = lambda *s: torch.nn.Parameter(torch.randn(*s, device=dev, dtype=dtype) * 0.02)
        self.n1, self.n2 = p(h), p(h)
        self.wqkv = p((self.nh + 2 * self.kv) * hd, h)
        self.wo = p(h, self.nh * hd)
        if experts:
            self.router = p(experts, h)
            # MoE FFN without TP (expert parallel over EP=1): TP divides only attention here.
            self.w1 = p(experts, h, 2 * ffn)
            self.w2 = p(experts, ffn, h)
        else:
            self.w1 = p(2 * ffn // tp, h)
            self.w2 = p(h, ffn // tp)

    def attention(self, x, s):
        q, k, v = F.linear(x, self.wqkv).split(
            [self.nh * self.hd, self.kv * self.hd, self.kv * self.hd], -1
        )
        b = x.shape[0] // s
        q = q.view(b, s, self.nh, self.hd).transpose(1, 2)
        k = k.view(b, s, self.kv, self.hd).transpose(1, 2)
        v = v.view(b, s, self.kv, self.hd).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.nh)
        return F.linear(o.transpose(1, 2).reshape(x.shape[0], -1), self.wo)

    def dense_ffn(self, x):
        g, u = F.linear(x, self.w1).chunk(2, -1)
        return F.linear(F.silu(g) * u, self.w2)

    def moe_ffn(self, x):
        probs = torch.softmax(F.linear(x, self.router).float(), -1)
        w, idx = probs.topk(self.topk, -1)
        flat = idx.reshape(-1)
        order = flat.argsort()
        counts = torch.bincount(flat, minlength=self.experts)
        offs = counts.cumsum(0).to(torch.int32)
        xs = x.repeat_interleave(self.topk, 0)[order]
        g, u = torch._grouped_mm(xs, self.w1, offs=offs).chunk(2, -1)
        y = torch._grouped_mm(F.silu(g) * u, self.w2, offs=offs)
        out = torch.zeros_like(y).index_copy(0, order, y)
        return (out.view(x.shape[0], self.topk, -1) * w.to(y.dtype).unsqueeze(-1)).sum(1)

    def forward(self, x, s):
        x = x + self.attention(F.rms_norm(x, (x.shape[-1],), self.n1), s)
        y = F.rms_norm(x, (x.shape[-1],), self.n2)
        return x + (self.moe_ffn(y) if self.experts else self.dense_ffn(y))


def launch_rows(dev, timer) -> list[dict]:
    if dev.type != "cuda":
        return []
    x = torch.zeros(1, device=dev)
    n = 2000

    def eager():
        for _ in range(n):
            x.add_(1.0)

    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        eager()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(n):
            x.add_(1.0)
    rows = []
    for mode, fn in (("eager", eager), ("cuda_graph", g.replay)):
        gpu_s, host_s, _ = timer(fn, 0.05)
        rows.append(
            {
                "mode": mode,
                "kernels": n,
                "us_per_kernel_host": round(host_s / n * 1e6, 3),
                "us_per_kernel_gpu": round(gpu_s / n * 1e6, 3),
            }
        )
    return rows


def layer_row(name, cfg, tp, shape, dev, dtype, timer, min_s, graphs) -> list[dict]:
    h, nh, kv, hd, ffn, experts, topk, _ = cfg
    mb, seq = shape
    tokens = mb * seq
    torch.manual_seed(0)
    layer = Layer(h, nh, kv, hd, ffn, experts, topk, tp, dev, dtype)
    x = torch.randn(tokens, h, device=dev, dtype=dtype, requires_grad=True)
    dy = torch.randn(tokens, h, device=dev, dtype=dtype)

    def step():
        y = layer(x, seq)
        y.backward(dy)

    base = {
        "model": name,
        "tp": tp,
        "batch": mb,
        "seq": seq,
        "tokens": tokens,
        "hidden": h,
        "heads": nh,
        "kv_heads": kv,
        "head_dim": hd,
        "ffn": ffn,
        "experts": experts,
        "top_k": topk,
        "dtype": str(dtype).split(".")[-1],
    }
    rows = []
    gpu_s, host_s, reps = timer(step, min_s)
    fwd_gpu, _, _ = timer(lambda: layer(x, seq), min_s / 2)
    rows.append(
        {
            **base,
            "mode": "eager",
            "fwd_bwd_ms": round(gpu_s * 1e3, 4),
            "fwd_bwd_host_ms": round(host_s * 1e3, 4),
            "fwd_ms": round(fwd_gpu * 1e3, 4),
            "reps": reps,
        }
    )
    if graphs and not experts and dev.type == "cuda":
        try:
            graphed = torch.cuda.make_graphed_callables(_Wrap(layer, seq), (x,))

            def gstep():
                graphed(x).backward(dy)

            gpu_s, host_s, reps = timer(gstep, min_s)
            rows.append(
                {
                    **base,
                    "mode": "cuda_graph",
                    "fwd_bwd_ms": round(gpu_s * 1e3, 4),
                    "fwd_bwd_host_ms": round(host_s * 1e3, 4),
                    "fwd_ms": "",
                    "reps": reps,
                }
            )
        except Exception as err:  # noqa: BLE001 -- a failed capture is reported, not fatal
            rows.append(
                {
                    **base,
                    "mode": f"cuda_graph_failed:{type(err).__name__}",
                    "fwd_bwd_ms": "",
                    "fwd_bwd_host_ms": "",
                    "fwd_ms": "",
                    "reps": 0,
                }
            )
    return rows


class _Wrap(torch.nn.Module):
    def __init__(self, layer, seq):
        super().__init__()
        self.layer, self.seq = layer, seq

    def forward(self, x):
        return self.layer(x, self.seq)


def write(path, rows):
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--min-ms", type=float, default=20.0)
    ap.add_argument(
        "--budget-s", type=float, default=150.0, help="stop starting new cases after this"
    )
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    timer = timed_cuda if cuda else timed_cpu
    t0 = time.time()
    with open(os.path.join(a.out, "layers_meta.txt"), "w") as f:
        f.write(f"torch {torch.__version__} cuda {torch.version.cuda}\n")
        if cuda:
            p = torch.cuda.get_device_properties(0)
            f.write(f"device {p.name} sms {p.multi_processor_count}\n")
            f.write(f"cudnn {torch.backends.cudnn.version()}\n")
    if cuda:  # warm the GPU as the shared tables' method does
        m = torch.randn(8192, 8192, device=dev, dtype=dtype)
        for _ in range(20):
            m @ m
        torch.cuda.synchronize()
    write(os.path.join(a.out, "launch.csv"), launch_rows(dev, timer))
    models = TINY if a.tiny else {**DENSE, **MOE}
    shapes = ((2, 32), (1, 128)) if a.tiny else SHAPES
    cases = [(n, c, tp, t) for n, c in models.items() for tp in c[7] for t in shapes]
    random.Random(7).shuffle(cases)
    rows: list[dict] = []
    for name, cfg, tp, tok in cases:
        if time.time() - t0 > a.budget_s:
            print(f"budget reached, {len(rows)} rows", flush=True)
            break
        try:
            if cuda:
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                    rows += layer_row(name, cfg, tp, tok, dev, dtype, timer, a.min_ms / 1e3, True)
            else:
                rows += layer_row(name, cfg, tp, tok, dev, dtype, timer, a.min_ms / 1e3, False)
        except Exception as err:  # noqa: BLE001 -- one failed case must not end the run
            rows.append(
                {
                    "model": name,
                    "tp": tp,
                    "batch": tok[0],
                    "seq": tok[1],
                    "mode": f"failed:{type(err).__name__}:{err}"[:200],
                }
            )
        write(os.path.join(a.out, "layers.csv"), rows)
        print(
            f"[{time.time() - t0:6.1f}s] {name} tp{tp} {tok}: {rows[-1].get('mode')} {rows[-1].get('fwd_bwd_ms')}",
            flush=True,
        )
        if cuda:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
