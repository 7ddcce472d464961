"""The shapes `planner measure kernels` measures are the shapes the Pricer looks up (issue 32 item
3): a table holding exactly the derived rows prices every look-up of a full estimate from a
measured row (no interpolation, no curve), and holds no row no estimate asks for."""

from __future__ import annotations

import itertools

import pytest

import models_zoo
from cost_models.kernel_shapes import (
    MEMORY_BYTES_PER_ELEMENT,
    ShapeRecorder,
    activation_op,
    kernel_shapes,
    memory_rows,
    workload_variants,
)
from cost_models.kernels import EXTRAPOLATED, MEASURED, KernelBook
from cost_models.pricer import Pricer
from cost_models.specs import KernelTables, Layout

SEQ = {"llama3-8b": 8192, "deepseek-v3": 4096, "mixtral-8x7b": 4096, "llama3-8b-swa": 8192}
TPS, MBS, CPS = (1, 2, 4, 8), (1, 2), (1, 2)
EPS = {"llama3-8b": (1,), "deepseek-v3": (8, 32), "mixtral-8x7b": (1, 2, 8), "llama3-8b-swa": (1,)}


def _model(name: str):
    """A preset; `-swa`: with a 2,048-token sliding window on every layer (the windowed
    attention look-ups, KernelBook.window_ratio)."""
    if name.endswith("-swa"):
        base = models_zoo.load_model(name.removesuffix("-swa"))
        return base.model_copy(update={"sliding_window": 2048})
    return models_zoo.load_model(name)


class SpyBook(KernelBook):
    """The Pricer's KernelBook, keeping every look-up and how it was answered."""

    seen: list = []

    def _cached(self, key, grid, query):
        found = super()._cached(key, grid, query)
        SpyBook.seen.append((key, found[1]))
        return found


def _tables(ks) -> KernelTables:
    """The derived rows as a table, each at a made-up 1 ms (the times do not matter here)."""
    return KernelTables(
        source="derived",
        gemm=[(*r, 1.0) for r in ks.gemm],
        grouped_gemm=[(*r, 1.0) for r in ks.grouped_gemm],
        attention=[(*r, 1.0, 0.3) for r in ks.attention],
        memory_bound=[(op, nbytes, 1.0) for op, _t, _w, _d, nbytes, _k in ks.memory_bound],
    )


def _row_of(key: tuple) -> tuple:
    """A KernelBook cache key as the row measure writes for it."""
    kind, *dims = key
    if kind == "gemm":
        m, n, k, dtype, layout = dims
        return kind, (int(m), int(n), int(k), dtype, layout)
    if kind == "grouped":
        e, r, n, k, dtype = dims
        return "grouped_gemm", (int(e), int(r), int(n), int(k), dtype)
    if kind == "attention":
        b, s, h, kv, dqk, dv, causal, window, kern = dims
        return kind, (int(b), int(s), int(h), int(kv), int(dqk), int(dv), causal, window, kern)
    if kind == "window":  # KernelBook.window_ratio: the saving looked up at (seq, window)
        _b, s, _h, _kv, _dqk, _dv, causal, window, kern = dims
        return kind, (int(s), window, kern, causal)
    return "memory", tuple(dims)


@pytest.mark.parametrize("name", sorted(SEQ))
def test_every_lookup_of_an_estimate_is_a_measured_row_and_every_row_is_looked_up(
    name, monkeypatch
):
    model = _model(name)
    seq = SEQ[name]
    base = models_zoo.load_cluster("dgx-h100")
    ks = kernel_shapes(
        model, base, seq_len=seq, tps=TPS, micro_batches=MBS, cps=CPS, eps=EPS[name]
    )
    monkeypatch.setattr("cost_models.pricer.KernelBook", SpyBook)
    SpyBook.seen = []
    # PyTorch's CP ring takes sliding windows (TE's fused ring does not: cost_models.rules)
    ring = "torch_ring" if model.sliding_window else "fused_ring"
    for w in workload_variants(seq, ("bf16", "fp8")):
        w = w.model_copy(update={"global_batch_seqs": 64, "cp_attention": ring})
        for tp in TPS:
            for cp in CPS:
                for ep in EPS[name]:
                    gpus = tp * cp * ep
                    cluster = models_zoo.load_cluster("dgx-h100", gpus)
                    cluster = cluster.model_copy(update={"kernels": _tables(ks)})
                    pricer = Pricer(model, cluster, w)
                    # etp tp at EP 1: torchtitan's experts follow TP (framework.expert_tp)
                    etps = (1, tp) if model.moe is not None and ep == 1 and tp > 1 else (1,)
                    for mb, etp in itertools.product(MBS, etps):
                        lo = Layout(tp=tp, cp=cp, dp=ep, ep=ep, etp=etp, micro_batch=mb, pp=1)
                        pricer.estimate(lo)
                        if tp > 1:  # TP-overlap partner GEMMs (stage.tp_partner_gemm_s)
                            over = {"tp_comm_overlap": True, "sequence_parallel": True}
                            pricer.estimate(lo.model_copy(update=over))
    statuses = {}
    for key, status in SpyBook.seen:
        statuses.setdefault(_row_of(key), set()).add(status)
    not_measured = {k: s for k, s in statuses.items() if s != {MEASURED}}
    assert not not_measured, f"{len(not_measured)} look-ups not measured: {list(not_measured)[:5]}"
    emitted = {("gemm", r) for r in ks.gemm} | {("grouped_gemm", r) for r in ks.grouped_gemm}
    emitted |= {("attention", r) for r in ks.attention if not r[7]}
    emitted |= {("window", (r[1], r[7], r[8], r[6])) for r in ks.attention if r[7]}
    looked_up = {k for k in statuses if k[0] != "memory"}
    assert emitted == looked_up  # nothing missing, and no shape nobody asks for
    assert ks.attention and ks.gemm
    assert bool(ks.grouped_gemm) == (model.moe is not None)
    assert any(r[7] for r in ks.attention) == (model.sliding_window is not None)


def test_fp8_passes_are_measured_as_tn_and_routers_and_heads_stay_bf16():
    model = models_zoo.load_model("mixtral-8x7b")
    ks = kernel_shapes(
        model, models_zoo.load_cluster("dgx-h100"), seq_len=4096, tps=(1,), micro_batches=(1,),
        cps=(1,), eps=(1,), dtypes=("fp8",),
    )  # fmt: skip
    layouts = {(d, lay) for _m, _n, _k, d, lay in ks.gemm}
    assert layouts == {("fp8", "TN"), ("bf16", "TN"), ("bf16", "NN"), ("bf16", "NT")}
    bf16 = {(m, n, k) for m, n, k, d, lay in ks.gemm if d == "bf16" and lay == "TN"}
    # the router (4096 tokens x 8 experts x 4096 hidden) and the LM head, forward
    assert bf16 == {(4096, 8, 4096), (4096, 32000, 4096)}
    # the routed experts' grouped GEMMs: 8 experts, 4096 * 2 / 8 = 1024 rows each
    assert (8, 1024, 2 * 14336, 4096, "fp8") in ks.grouped_gemm


def test_attention_cases_carry_the_models_heads_gqa_and_mla_dims():
    c = models_zoo.load_cluster("dgx-h100")
    llama = models_zoo.load_model("llama3-70b")
    ks = kernel_shapes(llama, c, seq_len=8192, tps=(1, 8), micro_batches=(2,), cps=(1,))
    assert {r for r in ks.attention if r[-1] == "fused"} == {
        (2, 8192, 64, 8, 128, 128, True, 0, "fused"),
        (2, 8192, 8, 1, 128, 128, True, 0, "fused"),  # TP 8: 8 query heads, one KV head
    }
    v3 = models_zoo.load_model("deepseek-v3")
    ks = kernel_shapes(v3, c, seq_len=4096, tps=(8,), micro_batches=(1,), cps=(1,), eps=(8,))
    # MLA: 128 heads / 8, query-key head 128 + 64 rope = 192, value head 128, no KV sharing
    assert {r[:7] for r in ks.attention} == {(1, 4096, 16, 16, 192, 128, True)}


def test_memory_bound_ops_follow_the_model_and_count_each_tensor_once():
    llama = models_zoo.load_model("llama3-8b")
    rows = memory_rows(llama, [4096], [1, 8])
    assert {(op, t, w) for op, t, w, *_ in rows} == {
        ("copy", 4096, 4096), ("add", 4096, 4096), ("rmsnorm", 4096, 4096),
        ("add", 512, 4096), ("rmsnorm", 512, 4096),  # TP 8 sequence parallel: 4096 / 8 tokens
        ("swiglu", 4096, 14336), ("swiglu", 4096, 1792),
        # a fused SwiGLU is priced at the add row of its size (compute.FUSED_ACTIVATION_ROW)
        ("add", 4096, 14336), ("add", 4096, 1792),
        # fused rotary as a copy: (32 + 8) heads x 128 at TP 1, (4 + 1) x 128 at TP 8
        ("copy", 4096, 5120), ("copy", 4096, 640),
    }  # fmt: skip
    assert all(b == t * w * MEMORY_BYTES_PER_ELEMENT[op] for op, t, w, _d, b, _k in rows)
    gpt3 = models_zoo.load_model("gpt3-175b")
    assert activation_op(gpt3) == "gelu" and gpt3.normalization == "layernorm"
    mixtral = models_zoo.load_model("mixtral-8x7b")
    ops = {(op, t, w, k) for op, t, w, _d, _b, k in memory_rows(mixtral, [1024], [1])}
    assert ("moe_permute", 2048, 4096, 2) in ops and ("moe_unpermute", 2048, 4096, 2) in ops
    assert ("swiglu", 2048, 14336, 1) in ops  # expert activation over the routed rows
    # Qwen3's per-head q / k norms: the norm over [tokens x heads, head_dim] (32 query heads and
    # 4 KV heads of 128 at TP 1; 8 and 1 at TP 4)
    qwen = models_zoo.load_model("qwen3-30b-a3b")
    norms = {(t, w) for op, t, w, *_ in memory_rows(qwen, [1024], [1, 4]) if op == "rmsnorm"}
    assert {(32 * 1024, 128), (4 * 1024, 128), (8 * 1024, 128), (1024, 128)} <= norms
    assert not any(w == 128 for op, t, w, *_ in memory_rows(llama, [1024], [1, 4]) if op == "rmsnorm")


def test_recorder_answers_not_in_the_table_so_pricing_carries_on():
    rec = ShapeRecorder()
    assert rec.gemm_s(1, 2, 3, "bf16", "TN") == (None, EXTRAPOLATED)
    assert rec.memory_bound_s("copy", 10.0) == (None, EXTRAPOLATED)
    assert rec.gemm == {(1, 2, 3, "bf16", "TN")} and rec.memory_bound == {("copy", 10.0)}
