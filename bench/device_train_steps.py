"""Whole training steps on one GPU, to check the step model against (issue 32).

The issue asks that "given a kernel table measured on the machine that ran a set of steps, the
calibrated model predicts those steps". The shared runs are multi-GPU: their error mixes network,
framework and kernel terms. One GPU has no network term, so a step measured here against the
model calibrated from kernels measured on the same GPU (bench/device_single_gpu.sh) isolates the
compute side: the layers, the embedding, the LM head and loss, the optimizer, the glue kernels.

The step is torchtitan's eager path written out in plain PyTorch (torch only, so it runs on a bare
GPU machine): the Llama / Qwen3 decoder of torchtitan/models (RMSNorm, fused wqkv (torchtitan's fuse_qkv), complex
RoPE, SDPA causal with GQA, SwiGLU w1/w3/w2; Qwen3's q/k norm; MoE as torchtitan's GroupedExperts:
softmax router, top-k, sort by expert, torch._grouped_mm for w1, w3, w2, weighted scatter back),
an untied LM head, loss F.cross_entropy on fp32-cast logits (torchtitan's loss uncompiled),
FSDP2 fully_shard per block and root with MixedPrecisionPolicy(bf16 params, fp32 reduce) on a
one-rank group (torchtitan's apply_fsdp; with one rank its collectives are local copies), fused
AdamW (lr 3e-4, betas 0.9/0.95, weight decay 0.1), clip_grad_norm_ 1.0, full activation
checkpointing per block where a config asks (torchtitan activation_checkpoint.mode 'full').

Each config: 3 warm-up steps, then STEPS timed steps (CUDA events around each optimizer step,
all micro-batches inside), peak memory, and one step under torch.profiler whose kernels are summed
by name (profile_<name>.json) so a gap can be attributed offline. Writes steps.csv and
steps_runs.yaml (published_runs.yaml schema; `planner validate --data` reads it).

--sustain S: instead, run each config's steps back to back for S seconds and log every step's
time with the SM clock and power (sustained_steps.csv): does a training step, which mixes GEMMs
with memory-bound kernels, hold its burst speed under the power cap, as square GEMMs do not
(../shared/data/kernels/README.md sustained.csv)?

Usage: python3 bench/device_train_steps.py --models DIR --out DIR [--only NAME ...] [--tiny]
       [--sustain S]
(--tiny: CPU smoke test with the dims divided down; the measured figures are GPU only.)
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

# name, model file (bench/single_gpu/*.json), seq, micro-batch, micro-batches per step, AC, SDPA backend
CONFIGS = [
    ("s1b-seq4096-mb2", "s1b", 4096, 2, 1, "none", "flash"),
    ("s1b-seq8192-mb1", "s1b", 8192, 1, 1, "none", "flash"),
    ("s1b-seq2048-mb4-ga2", "s1b", 2048, 4, 2, "none", "flash"),
    ("s1b-seq4096-mb2-cudnn", "s1b", 4096, 2, 1, "none", "cudnn"),
    ("s3b-seq4096-mb1", "s3b", 4096, 1, 1, "none", "flash"),
    ("s3b-seq4096-mb2-full", "s3b", 4096, 2, 1, "full", "flash"),
    ("s3b-seq8192-mb1-full", "s3b", 8192, 1, 1, "full", "flash"),
    ("s8b8-seq4096-mb1", "s8b8", 4096, 1, 1, "none", "flash"),
    ("s8b8-seq8192-mb2-full", "s8b8", 8192, 2, 1, "full", "flash"),
    ("q30b4-seq4096-mb1", "q30b4", 4096, 1, 1, "none", "flash"),
    ("q30b4-seq4096-mb2-full", "q30b4", 4096, 2, 1, "full", "flash"),
]
# A held-out set, chosen after the first set's results were seen and measured before any model
# change made from them: other dims, GQA ratios, vocabularies, a longer sequence, another MoE.
HELD_OUT = [
    ("h2b-seq4096-mb2", "h2b", 4096, 2, 1, "none", "flash"),
    ("h2b-seq4096-mb2-cudnn", "h2b", 4096, 2, 1, "none", "cudnn"),
    ("h2b-seq2048-mb4-ga4", "h2b", 2048, 4, 4, "none", "flash"),
    ("h2b-seq16384-mb1-full", "h2b", 16384, 1, 1, "full", "flash"),
    ("h7b8-seq4096-mb1", "h7b8", 4096, 1, 1, "none", "flash"),
    ("h7b8-seq8192-mb1-full", "h7b8", 8192, 1, 1, "full", "flash"),
    ("m4-seq4096-mb2", "m4", 4096, 2, 1, "none", "flash"),
    ("m4-seq4096-mb4-full", "m4", 4096, 4, 1, "full", "flash"),
]
WARMUP, STEPS = 3, 6


def rope_freqs(head_dim: int, seq: int, theta: float, dev) -> torch.Tensor:
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=dev).float() / head_dim)
    t = torch.arange(seq, device=dev).float()
    return torch.polar(torch.ones(seq, head_dim // 2, device=dev), torch.outer(t, freqs))


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    # torchtitan's complex RoPE: view pairs as complex, multiply, view back (fp32 math)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs[None, :, None, :]).flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, m: dict, backend: str):
        super().__init__()
        h, nh, kv = m["hidden_size"], m["num_attention_heads"], m["num_kv_heads"]
        self.nh, self.kv = nh, kv
        self.hd = m.get("head_dim") or h // nh
        # one fused q/k/v projection, as torchtitan's llama3 presets build it (fuse_qkv=True)
        self.wqkv = nn.Linear(h, (nh + 2 * kv) * self.hd, bias=False)
        self.wo = nn.Linear(nh * self.hd, h, bias=False)
        eps = m.get("norm_eps", 1e-5)
        self.qk_norm = bool(m.get("qk_norm"))
        if self.qk_norm:
            self.q_norm, self.k_norm = nn.RMSNorm(self.hd, eps), nn.RMSNorm(self.hd, eps)
        self.backend = backend

    def forward(self, x, freqs):
        b, s, _ = x.shape
        q, k, v = self.wqkv(x).split(
            [self.nh * self.hd, self.kv * self.hd, self.kv * self.hd], -1
        )
        q = q.view(b, s, self.nh, self.hd)
        k, v = k.view(b, s, self.kv, self.hd), v.view(b, s, self.kv, self.hd)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, freqs), apply_rope(k, freqs)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        o = sdpa(q, k, v, self.backend, self.nh != self.kv)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


def sdpa(q, k, v, backend: str, gqa: bool):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if q.device.type != "cuda":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    chosen = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    with sdpa_kernel([chosen]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)


class FeedForward(nn.Module):
    def __init__(self, h: int, ffn: int):
        super().__init__()
        self.w1, self.w3 = nn.Linear(h, ffn, bias=False), nn.Linear(h, ffn, bias=False)
        self.w2 = nn.Linear(ffn, h, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """torchtitan GroupedExperts with the local (no-EP) token dispatch."""

    def __init__(self, h: int, moe: dict):
        super().__init__()
        e, f = moe["num_experts"], moe["expert_ffn_hidden_size"]
        self.e, self.k = e, moe["top_k"]
        self.gate = nn.Linear(h, e, bias=False)
        init = lambda *s: nn.Parameter(torch.randn(*s) * 0.02)
        self.w1, self.w3, self.w2 = init(e, h, f), init(e, h, f), init(e, f, h)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = torch.softmax(self.gate(x).float(), -1)
        w, idx = probs.topk(self.k, -1)
        w = w / w.sum(-1, keepdim=True)
        flat = idx.reshape(-1)
        order = flat.argsort(stable=True)
        counts = torch.histc(flat.float(), bins=self.e, min=0, max=self.e - 1)
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        xs = x[order // self.k]
        if xs.device.type == "cuda":
            gmm = lambda a, wt: torch._grouped_mm(a, wt.to(a.dtype), offs=offs)
        else:  # CPU smoke test: the same arithmetic, expert by expert
            gmm = lambda a, wt: cpu_grouped(a, wt.to(a.dtype), offs)
        hdn = F.silu(gmm(xs, self.w1)) * gmm(xs, self.w3)
        y = gmm(hdn, self.w2) * w.reshape(-1)[order, None].to(xs.dtype)
        out = torch.zeros_like(x).index_add_(0, order // self.k, y)
        return out.view(shape)


def cpu_grouped(a, w, offs):
    outs, start = [], 0
    for i, end in enumerate(offs.tolist()):
        outs.append(a[start:end] @ w[i])
        start = end
    return torch.cat(outs)


class Block(nn.Module):
    def __init__(self, m: dict, backend: str):
        super().__init__()
        h, eps = m["hidden_size"], m.get("norm_eps", 1e-5)
        self.attention_norm, self.ffn_norm = nn.RMSNorm(h, eps), nn.RMSNorm(h, eps)
        self.attention = Attention(m, backend)
        moe = m.get("moe")
        self.feed_forward = MoE(h, moe) if moe else FeedForward(h, m["ffn_hidden_size"])

    def forward(self, x, freqs):
        x = x + self.attention(self.attention_norm(x), freqs)
        return x + self.feed_forward(self.ffn_norm(x))


class Decoder(nn.Module):
    def __init__(self, m: dict, backend: str, seq: int, full_ac: bool):
        super().__init__()
        self.tok_embeddings = nn.Embedding(m["vocab_size"], m["hidden_size"])
        self.layers = nn.ModuleList(Block(m, backend) for _ in range(m["num_layers"]))
        self.norm = nn.RMSNorm(m["hidden_size"], m.get("norm_eps", 1e-5))
        self.output = nn.Linear(m["hidden_size"], m["vocab_size"], bias=False)
        hd = m.get("head_dim") or m["hidden_size"] // m["num_attention_heads"]
        self.seq, self.hd, self.theta = seq, hd, m.get("rotary_base", 500000.0)
        self.full_ac = full_ac
        self.register_buffer("freqs", torch.zeros(1), persistent=False)

    def forward(self, tokens):
        if self.freqs.numel() == 1:
            self.freqs = rope_freqs(self.hd, self.seq, self.theta, tokens.device)
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            if self.full_ac:
                from torch.utils.checkpoint import checkpoint

                x = checkpoint(layer, x, self.freqs, use_reentrant=False)
            else:
                x = layer(x, self.freqs)
        return self.output(self.norm(x))


def shrink(m: dict) -> dict:
    """--tiny: the same structure at toy size (CPU smoke test)."""
    m = dict(m, hidden_size=64, num_attention_heads=4, num_kv_heads=2, vocab_size=256)
    m["head_dim"] = 16
    m["num_layers"] = min(m["num_layers"], 2)
    if m.get("moe"):
        m["moe"] = dict(m["moe"], num_experts=8, top_k=2, expert_ffn_hidden_size=32)
    else:
        m["ffn_hidden_size"] = 128
    return m


def build(m: dict, cfg: tuple, dev, tiny: bool):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    _, _, seq, _, _, ac, backend = cfg
    with torch.device(dev):
        model = Decoder(m, backend, seq, ac == "full")
    for p in model.parameters():
        nn.init.normal_(p, std=0.02) if p.dim() > 1 else None
    mp = MixedPrecisionPolicy(
        param_dtype=torch.float32 if tiny else torch.bfloat16, reduce_dtype=torch.float32
    )
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(
        model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=dev.type == "cuda"
    )
    return model, opt


def train_step(model, opt, batches):
    for tokens, labels in batches:
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        (loss / len(batches)).backward()
        del logits, loss
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    opt.step()
    opt.zero_grad(set_to_none=True)


def kernel_summary(prof) -> dict:
    rows = {}
    for ev in prof.key_averages():
        dev_us = getattr(ev, "self_device_time_total", None)
        if dev_us is None:
            dev_us = getattr(ev, "self_cuda_time_total", 0.0)
        if dev_us and dev_us > 0:
            rows[ev.key] = {"us": round(dev_us, 1), "count": ev.count}
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]["us"]))


def run_config(cfg, models_dir, out_dir, dev, tiny) -> dict:
    name, mfile, seq, mb, ga, ac, backend = cfg
    m = json.load(open(os.path.join(models_dir, mfile + ".json")))
    if tiny:
        m, seq = shrink(m), 32
    torch.manual_seed(0)
    model, opt = build(m, (name, mfile, seq, mb, ga, ac, backend), dev, tiny)
    nparams = sum(p.numel() for p in model.parameters())
    gen = lambda: torch.randint(0, m["vocab_size"], (mb, seq), device=dev)
    batches = [(gen(), gen()) for _ in range(ga)]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(WARMUP):
        train_step(model, opt, batches)
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(1 if tiny else STEPS):
        t0 = time.perf_counter()
        if dev.type == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            train_step(model, opt, batches)
            e.record()
            sync()
            times.append(s.elapsed_time(e) / 1e3)
        else:
            train_step(model, opt, batches)
            times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else float("nan")
    acts = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        train_step(model, opt, batches)
        sync()
    with open(os.path.join(out_dir, f"profile_{name}.json"), "w") as f:
        json.dump(kernel_summary(prof), f, indent=0)
    times.sort()
    med = times[len(times) // 2]
    row = dict(
        name=name, model=mfile, seq=seq, micro_batch=mb, micro_batches=ga, recompute=ac,
        attention=backend, params=nparams, step_s_median=med, step_s_min=times[0],
        step_s_max=times[-1], steps=len(times), peak_gib=peak,
        tokens_per_s=mb * ga * seq / med, model_json=m,
    )
    del model, opt, batches
    # fully_shard's hooks make module <-> state reference cycles: without a collection the fp32
    # sharded parameters of this model outlive `del` (the Adam states do not) and sit in the next
    # config's max_memory_allocated (bench/results/h100-2026-11-26: +4 B per earlier parameter)
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return row


def smi() -> list[str]:
    import subprocess

    q = "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    out = subprocess.run(["nvidia-smi", q, "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip()
    return [x.strip() for x in out.split(",")][:4]


def sustain_config(cfg, models_dir, dev, seconds: float, writer) -> None:
    """Steps back to back for `seconds`; one row per step with the clock read after it."""
    name, mfile, seq, mb, ga, ac, backend = cfg
    m = json.load(open(os.path.join(models_dir, mfile + ".json")))
    torch.manual_seed(0)
    model, opt = build(m, cfg, dev, False)
    gen = lambda: torch.randint(0, m["vocab_size"], (mb, seq), device=dev)
    batches = [(gen(), gen()) for _ in range(ga)]
    for _ in range(WARMUP):
        train_step(model, opt, batches)
    torch.cuda.synchronize()
    t0 = time.time()
    i = 0
    while time.time() - t0 < seconds:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        train_step(model, opt, batches)
        e.record()
        torch.cuda.synchronize()
        reading = smi() if i % 4 == 0 else ["", "", "", ""]
        writer.writerow([name, i, f"{time.time() - t0:.2f}", f"{s.elapsed_time(e):.2f}", *reading])
        i += 1
    print(f"{name}: {i} steps in {seconds:.0f} s", flush=True)
    del model, opt, batches
    gc.collect()  # see run_config
    torch.cuda.empty_cache()


def runs_yaml(rows: list[dict], gpu: str) -> str:
    """The measured steps as published_runs.yaml records (JSON is YAML)."""
    recs = []
    for r in rows:
        m = {k: v for k, v in r["model_json"].items() if k not in ("source", "published_params_b")}
        m.setdefault("head_dim", None)
        m.setdefault("mla", False)
        m["seq_len"] = r["seq"]
        m["gated_mlp"] = True
        recs.append({
            "id": f"single-gpu-{r['name']}", "framework": "torchtitan",
            "source": "bench/device_train_steps.py on one GPU (this project)",
            "confidence": "high", "model": m, "gpu": gpu, "num_gpus": 1, "gpus_per_node": 8,
            "interconnect": "one GPU", "layout": {
                "tp": 1, "pp": 1, "dp": 1, "cp": 1, "ep": 1, "vp": 1,
                "sequence_parallel": False, "zero_stage": 3, "micro_batch": r["micro_batch"],
                "global_batch_seqs": r["micro_batch"] * r["micro_batches"],
                "recompute": None if r["recompute"] == "none" else r["recompute"],
                "precision": "bf16"},
            # fused_norm: nn.RMSNorm is one aten::_fused_rms_norm kernel where this torch has it
            # (torch 2.11: the profiles' vectorized_layer_norm_kernel<.., true>), else the chain
            "settings": {"cross_entropy": "eager_fp32", "fused_elementwise": False,
                         "fused_norm": hasattr(torch.ops.aten, "_fused_rms_norm"),
                         "attention_kernel": "fa2" if r["attention"] == "flash" else "fused",
                         # what the peak is and what this step keeps (cost_models Workload):
                         # max_memory_allocated; FSDP2's phases; zero_grad(set_to_none=True);
                         # `del logits` only after backward; embedding in the root unit; wqkv
                         "peak_memory_stat": "allocated", "memory_phases": "fsdp2",
                         "grads_set_to_none": True, "logits_alive_in_backward": True,
                         "fsdp_root_holds_embedding": True, "fused_qkv": True},
            "measured_tokens_per_s_per_gpu": round(r["tokens_per_s"], 1),
            "tokens_derivation": "tokens per step / median step time (CUDA events)",
            "measured_step_time_s": round(r["step_s_median"], 5), "measured_mfu_pct": None,
            "peak_memory_gib": round(r["peak_gib"], 2) if r["peak_gib"] == r["peak_gib"] else None,
            "notes": "eager torchtitan-style step, FSDP2 on one rank",
        })
    return json.dumps(recs, indent=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="*")
    p.add_argument("--held-out", action="store_true", help="run the HELD_OUT configs")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--gpu", default="h100-sxm-80gb", help="GPU preset id for the records")
    p.add_argument("--sustain", type=float, default=0.0, help="seconds of steps per config")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dev = torch.device("cpu" if a.tiny else "cuda")
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo" if a.tiny else "nccl", rank=0, world_size=1)
    if dev.type == "cuda":
        torch.cuda.set_device(0)
    configs = HELD_OUT if a.held_out else CONFIGS
    if a.sustain:
        with open(os.path.join(a.out, "sustained_steps.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["config", "step", "t_s", "step_ms", "sm_clock_mhz", "power_w", "temp_c",
                        "throttle_reasons"])
            for cfg in configs:
                if not a.only or cfg[0] in a.only:
                    sustain_config(cfg, a.models, dev, a.sustain, w)
                    f.flush()
        dist.destroy_process_group()
        return
    rows = []
    for cfg in configs:
        if a.only and cfg[0] not in a.only:
            continue
        t0 = time.time()
        try:
            row = run_config(cfg, a.models, a.out, dev, a.tiny)
        except Exception as exc:  # one config failing (OOM, backend refused) must not lose the rest
            print(f"{cfg[0]}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            gc.collect()
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            continue
        rows.append(row)
        print(f"{row['name']}: {row['step_s_median']*1e3:.1f} ms/step "
              f"({row['step_s_min']*1e3:.1f}-{row['step_s_max']*1e3:.1f}), "
              f"{row['tokens_per_s']:.0f} tokens/s, peak {row['peak_gib']:.1f} GiB, "
              f"{time.time()-t0:.0f} s wall", flush=True)
        with open(os.path.join(a.out, "steps.csv"), "w", newline="") as f:
            keys = [k for k in rows[0] if k != "model_json"]
            w = csv.DictWriter(f, keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        with open(os.path.join(a.out, "steps_runs.yaml"), "w") as f:
            f.write(runs_yaml(rows, a.gpu))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
