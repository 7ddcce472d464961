"""How each framework issues the data-parallel gradient collectives, by hand.

Megatron (megatron/core/distributed/distributed_data_parallel.py, pipeline_parallel/schedules.py):
buckets of max(40M, 1M x dp) parameters on the first pipeline stage only, one collective per model
chunk elsewhere, each chunk's reduction launched after its last backward; FSDP (torchtitan,
llm-foundry): one reduce-scatter per transformer block; DeepSpeed: 5e8-element buckets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SHARED
from shared_data import published_runs

import models_zoo
from cost_models import comm
from cost_models.calibration import overlap_slowdown_s
from cost_models.errors import InvalidInput
from cost_models.estimate import estimate
from cost_models.framework import record_profile
from cost_models.memory import StageParams, stage_params, stage_tensors
from cost_models.pricer import Pricer
from cost_models.specs import Layout, Workload
from cost_models.stage import (
    dp_buckets,
    dp_edge_buckets_s,
    dp_tier_times_s,
    gather_payload_bytes,
    grad_sync_exposed_s,
)
from planner.cli import main
from planner.validate import record_inputs, record_settings
from tests import factories as f

# ------------------------------------------------------------------------ exposed reduction


def test_last_backward_hides_reduction_for_any_framework() -> None:
    # 1.0 s of reduction behind a 0.4 s backward: 0.6 s exposed.
    for dp_sync in ("fsdp", "deepspeed"):
        assert grad_sync_exposed_s(1.0, 0.4, 4, 2, 3, dp_sync) == pytest.approx(0.6)
    assert grad_sync_exposed_s(1.0, 0.4, 1, 1, 0, "megatron") == pytest.approx(0.6)


def test_megatron_later_stages_reduce_in_the_pipeline_bubble() -> None:
    # vp 1: stage r waits r backward micro-batches for the stages before it.
    assert grad_sync_exposed_s(1.0, 0.4, 4, 1, 0, "megatron") == pytest.approx(0.6)
    assert grad_sync_exposed_s(1.0, 0.4, 4, 1, 1, "megatron") == pytest.approx(0.6)
    assert grad_sync_exposed_s(1.0, 0.4, 4, 1, 2, "megatron") == pytest.approx(0.2)
    assert grad_sync_exposed_s(1.0, 0.4, 4, 1, 3, "megatron") == 0.0


def test_megatron_interleaved_chunks_start_as_their_backward_ends() -> None:
    # pp 4, vp 2, backward 0.4 s per micro-batch: one chunk's unit 0.2 s. Chunk 1 ends its
    # backward 1 x 4 x 0.2 = 0.8 s before the first stage's end, chunk 0 r x 0.2 s before it;
    # 0.5 s of reduction each, one after the other on the DP stream.
    # Stage 0: chunk 1 runs -0.8 .. -0.3, chunk 0 starts at 0 and ends at 0.5.
    assert grad_sync_exposed_s(1.0, 0.4, 4, 2, 0, "megatron") == pytest.approx(0.5)
    # Stage 1: chunk 0 starts at -0.2, ends at 0.3.
    assert grad_sync_exposed_s(1.0, 0.4, 4, 2, 1, "megatron") == pytest.approx(0.3)
    # A saturated stream: 2.0 s per chunk, chunk 1 -0.8 .. 1.2, chunk 0 1.2 .. 3.2.
    assert grad_sync_exposed_s(4.0, 0.4, 4, 2, 0, "megatron") == pytest.approx(3.2)


# ---------------------------------------------------------------------------- bucket counts


def test_megatron_buckets_on_the_first_stage_only() -> None:
    # 100M parameters, dp 8: buckets of max(40M, 8M) = 40M -> 3; dp 64: 64M -> 2.
    assert dp_buckets(100e6, 8, 1, 12, None) == 3
    assert dp_buckets(100e6, 64, 1, 12, None) == 2
    # Pipeline ranks > 0: bucketing off, one collective per model chunk.
    assert dp_buckets(100e6, 8, 1, 12, None, stage=1) == 1
    assert dp_buckets(100e6, 8, 1, 12, None, stage=1, vp=4) == 4
    # First stage, vp 4: chunk 0 (100M) in 3 buckets, chunks 1-3 one each.
    assert dp_buckets(400e6, 8, 1, 12, None, vp=4) == 6
    # An explicit bucket size replaces the default.
    assert dp_buckets(100e6, 8, 1, 12, 10_000_000) == 10


def test_a_bucket_never_splits_a_parameter() -> None:
    """Megatron closes a bucket only at a parameter's end (param_and_grad_buffer.py), so a bucket
    smaller than every parameter (NVIDIA's MLPerf 405B conf: bucket_size 200) issues one
    collective per parameter tensor, not params / 200; larger buckets are unaffected."""
    assert dp_buckets(100e6, 8, 1, 12, 200) == 500_000  # uncounted tensors: no bound
    assert dp_buckets(100e6, 8, 1, 12, 200, tensors=75) == 75
    assert dp_buckets(100e6, 8, 1, 12, 10_000_000, tensors=75) == 10
    assert dp_buckets(400e6, 8, 1, 12, 200, vp=4, tensors=80) == 20 + 3  # chunk 0, then 1 each
    assert dp_buckets(400e6, 8, 1, 12, 200, dp_sync="deepspeed", tensors=80) == 80
    assert dp_buckets(100e6, 8, 3, 12, 200, dp_sync="fsdp", tensors=80) == 12  # per unit


def test_stage_tensors_follow_the_transformer_engine_layer_spec() -> None:
    """Llama 3 8B on one stage: per layer linear_qkv (weight, fused layer_norm_weight),
    linear_proj, linear_fc1 (weight, fused layer_norm_weight), linear_fc2 = 6; 32 layers, the
    word embeddings, the final norm and the untied output layer: 195. GPT-3-style biases and
    LayerNorm add a bias per Linear and per norm; an MoE layer has pre_mlp_layernorm and the
    router in place of the MLP, and two weights per local expert."""
    llama = f.dense_model()
    assert stage_tensors(llama, Layout(dp=8), 32, 0, 0) == (32 * 6 + 3, 0)
    assert stage_tensors(llama, Layout(dp=8, pp=2), 16, 0, 1) == (16 * 6 + 2, 0)
    gpt = llama.model_copy(update={"linear_bias": True, "normalization": "layernorm"})
    assert stage_tensors(gpt, Layout(dp=8, pp=2), 16, 0, 0)[0] == 16 * 12 + 1
    moe = f.moe_model()
    local = moe.moe.num_experts // 8
    dense, expert = stage_tensors(moe, Layout(dp=8, ep=8), 0, 4, 1)
    assert expert == 4 * local * 2
    shared = (2 + (1 if moe.moe.shared_expert_gate else 0)) if moe.moe.num_shared_experts else 0
    attn = 8 if moe.mla is not None else 3 + (2 if moe.qk_norm else 0)
    assert dense == 4 * (attn + 2 + shared)


def test_fsdp_reduces_per_block_and_deepspeed_in_5e8_buckets() -> None:
    assert dp_buckets(100e6, 8, 2, 12, None, dp_sync="fsdp") == 12
    assert dp_buckets(100e6, 8, 3, 12, None, dp_sync="fsdp") == 12
    assert dp_buckets(1.2e9, 8, 1, 12, None, dp_sync="deepspeed") == 3
    # ZeRO-3 reduces in the same ipg buckets (zero/stage3.py
    # reduce_independent_p_g_buckets_and_remove_grads), not per layer
    assert dp_buckets(1.2e9, 8, 3, 40, None, dp_sync="deepspeed") == 3


def test_deepspeed_zero3_gathers_per_fetch() -> None:
    """DeepSpeed ZeRO-3 all-gathers once per fetch: whole parameters until 5e7 elements
    (fetch_sub_module's prefetch), counted over the layers' modules (params.layer_modules,
    fetches_per_layer). Llama 3 70B at TP 1: every module (qkv 8.4e7, dense 6.7e7, fused
    dense_h_to_4h 4.7e8, dense_4h_to_h 2.35e8) is past 5e7, 4 a layer; Llama 3 8B at TP 1:
    qkv + dense (4.2e7) reach it only with dense_h_to_4h, then dense_4h_to_h alone, 2 a layer;
    at TP 8 a layer holds 2.7e7, so a group spans two layers. Other frameworks gather in their
    reduction's buckets."""
    from cost_models.params import fetches_per_layer, layer_modules
    from cost_models.stage import dp_gather_buckets

    for name, tp, per_layer in (
        ("llama3-70b", 1, 4.0),
        ("llama3-8b", 1, 2.0),
        ("llama3-8b", 8, 0.5),
    ):
        units = layer_modules(models_zoo.load_model(name), Layout(tp=tp), moe=False)
        assert fetches_per_layer(tuple(units), 5e7) == per_layer, (name, tp)
    model = models_zoo.load_model("llama3-8b")
    sp = stage_params(model, Layout(tp=1, dp=8), model.num_layers, 0, 0)
    assert sp.deepspeed_fetches == 32 * 2 + 2  # and the embedding and the head, one each
    assert dp_gather_buckets(8e9, 3, "deepspeed", sp.deepspeed_fetches, 16) == 66
    assert dp_gather_buckets(8e9, 3, "fsdp", sp.deepspeed_fetches, 32) == 32
    assert dp_gather_buckets(8e9, 1, "deepspeed", sp.deepspeed_fetches, 16) == 16


def test_later_stage_pays_one_latency_per_chunk() -> None:
    # 400M parameters reduce-scattered over 8 nodes (one GPU each, tp 8): dp 8 -> 40M buckets.
    # Stage 0 issues 10 buckets, stage 1 one collective: the bytes are the same, the ring
    # latency 7 steps x 8 us (factories.cluster) is paid 10 times vs once.
    cluster = f.cluster(64)
    layout = Layout(tp=8, pp=2, dp=8, zero_stage=1, sequence_parallel=True)
    sp = StageParams(dense=400e6, expert=0.0, largest_layer=10e6, num_layers=40)
    span = {"dp_cp": [1, 8]}
    grads0, _ = dp_tier_times_s(cluster, layout, sp, span, stage=0)
    grads1, _ = dp_tier_times_s(cluster, layout, sp, span, stage=1)
    assert grads0[1] - grads1[1] == pytest.approx(9 * 7 * 8e-6)
    bytes_s = 7 / 8 * 400e6 * 4 / (50e9 * 0.9)
    assert grads1[1] == pytest.approx(bytes_s + 7 * 8e-6)
    assert grads1[1] == pytest.approx(
        comm.collective_time_s("reduce_scatter", 400e6 * 4, [1, 8], cluster.tiers)
    )


def test_profiles_set_their_dp_sync() -> None:
    w = Workload(seq_len=4096, global_batch_seqs=64)
    assert record_profile("megatron").workload(w).dp_sync == "megatron"
    assert record_profile("torchtitan").workload(w).dp_sync == "fsdp"
    assert record_profile("llm-foundry").workload(w).dp_sync == "fsdp"
    assert record_profile("deepspeed").workload(w).dp_sync == "deepspeed"
    assert record_profile("other").workload(w).dp_sync == "megatron"


@pytest.mark.skipif(not (SHARED / "data/published_runs.yaml").exists(), reason="no ../shared")
def test_record_settings_carry_the_recipe_dispatcher_and_ep_overlap() -> None:
    # The Megatron-Bridge records' `settings:` (published_runs.yaml) reach the priced
    # inputs: Qwen3-235B on H100 (26.04.01) overlaps the all-to-all, DeepSeek-V3 on GB300
    # uses the flex (HybridEP) dispatcher and overlaps it.
    records = {r["id"]: r for r in published_runs()}
    qwen = records["mbridge-26.04.01-h100-qwen3-235b-a22b"]
    assert record_settings(qwen) == {"ep_overlap": True}
    _, _, work, lay = record_inputs(qwen)
    assert lay.ep_overlap and work.moe_dispatcher == "alltoall"
    _, _, work, lay = record_inputs(records["mbridge-26.08-gb300-deepseekv3"])
    assert lay.ep_overlap and work.moe_dispatcher == "deepep"


def test_dualpipe_keeps_the_default_buckets() -> None:
    # Megatron's first-stage-only bucketing belongs to its 1F1B schedules: under DualPipe every
    # rank holds two stages and reduces both copies in the default buckets (2 x 400M / 40M = 20).
    cluster = f.cluster(64)
    layout = Layout(tp=8, pp=2, dp=8, zero_stage=1, sequence_parallel=True, pp_schedule="dualpipe")
    sp = StageParams(dense=400e6, expert=0.0, largest_layer=10e6, num_layers=40)
    span = {"dp_cp": [1, 8]}
    grads0, _ = dp_tier_times_s(cluster, layout, sp, span, stage=0)
    grads1, _ = dp_tier_times_s(cluster, layout, sp, span, stage=1)
    assert grads1 == grads0
    bytes_s = 7 / 8 * 800e6 * 4 / (50e9 * 0.9)
    assert grads1[1] == pytest.approx(bytes_s + 20 * 7 * 8e-6)


# ------------------------------------------------------------------------ edge buckets


def test_edge_buckets_by_hand() -> None:
    """Llama 3 8B, ZeRO-1, DP 8 on one node: Megatron's buckets are max(40M, 8M) = 40M
    elements, an even share 8.03e9 / 201 = 40.0M; the last gradient bucket (backward order:
    params[::-1]) and the first gathered one hold the 525M-element input embedding, a bucket
    never splitting a parameter: one reduce-scatter of it in fp32 (4 B) and, under fp8
    parameters, one all-gather of it in bf16 (the embedding is not a Transformer Engine
    module), each priced as the one-bucket collective of those bytes."""

    model, cl = f.dense_model(), f.cluster(8)
    lo = Layout(dp=8, zero_stage=1)
    for fp8_params, gather_bytes in ((False, 2), (True, 1)):
        w = f.workload(precision="fp8", fp8_params=fp8_params) if fp8_params else f.workload()
        p = Pricer(model, cl, w)
        span = p.spans(lo)
        sp = p.stage_params(lo, p.stage_counts(lo)[0], 0)
        emb = 128_256 * 4_096
        assert sp.embedding == emb and dp_buckets(sp.dense, 8, 1, 32, None) == 201
        last, first = dp_edge_buckets_s(
            cl, lo, sp, span, None, comm=p.comm, grad_bytes=4, gather_bytes=gather_bytes
        )
        dp_cp = span["dp_cp"]
        assert last == pytest.approx(
            sum(comm.collective_tier_s("reduce_scatter", emb * 4, dp_cp, cl.tiers, 1))
        )
        assert first == pytest.approx(
            sum(comm.collective_tier_s("all_gather", emb * 2, dp_cp, cl.tiers, 1))
        )
    # the whole gather: the embedding and LM head at 2 B, the rest at the quantized 1 B
    assert gather_payload_bytes(10.0, 3.0, 1) == 7.0 + 6.0
    assert gather_payload_bytes(10.0, 3.0, 2) == 20.0  # bf16 parameters: all at 2 B
    assert gather_payload_bytes(10.0, 30.0, 0.5) == 20.0  # never more than the parameters


def test_edge_buckets_without_a_group_or_embedding() -> None:
    """No DP x CP group: nothing to reduce. A stage without the embedding (pp 2, stage 1 in
    Megatron: one collective, bucketing off) has its edge an even share of its buckets."""

    model, cl, w = f.dense_model(), f.cluster(8), f.workload()
    p = Pricer(model, cl, w)
    lo = Layout(tp=8, dp=1, zero_stage=1)
    sp = p.stage_params(lo, p.stage_counts(lo)[0], 0)
    assert dp_edge_buckets_s(cl, lo, sp, p.spans(lo), None, comm=p.comm) == (0.0, 0.0)
    sp = StageParams(dense=1e9, expert=0.0, largest_layer=1e8, num_layers=8)
    lo = Layout(dp=8, zero_stage=1)
    span = p.spans(lo)
    last, first = dp_edge_buckets_s(cl, lo, sp, span, None, comm=p.comm, grad_bytes=4)
    n = dp_buckets(1e9, 8, 1, 8, None)  # 25 buckets of 40M
    assert n == 25
    share = 1e9 / n
    assert last == pytest.approx(
        sum(comm.collective_tier_s("reduce_scatter", share * 4, span["dp_cp"], cl.tiers, 1))
    )
    assert first == pytest.approx(
        sum(comm.collective_tier_s("all_gather", share * 2, span["dp_cp"], cl.tiers, 1))
    )


def test_one_reduction_per_step_exposes_its_edges_behind_a_long_backward() -> None:
    """Megatron ZeRO-1, one micro-batch, a backward far longer than the collectives: what stays
    exposed is the last reduction bucket and the first gather bucket, plus the compute slowed
    beside the hidden rest (calibration.overlap_slowdown_s)."""

    model, cl = f.dense_model(), f.cluster(16)
    w = f.workload(global_batch=16)
    p = Pricer(model, cl, w)
    lo = Layout(dp=16, zero_stage=1)
    span = p.spans(lo)
    sp = p.stage_params(lo, p.stage_counts(lo)[0], 0)
    parts = p.stage_dp_parts(lo, sp, 100.0, span, 0)
    exposed, total = parts.exposed_s, parts.total_s
    last, first = dp_edge_buckets_s(cl, lo, sp, span, None, comm=p.comm)
    assert 0 < last + first < total
    assert exposed == pytest.approx(last + first + overlap_slowdown_s(total - last - first, p.cal))


def test_a_record_states_its_bucket_size() -> None:
    """`settings: {dp_bucket_elements: N}` (Megatron --ddp-bucket-size) reaches the workload;
    a non-positive size is refused naming the field."""

    unstated = dict.fromkeys(
        ("cp", "ep", "vp", "sequence_parallel", "micro_batch", "recompute", "precision",
         "zero_stage")
    )  # fmt: skip

    def inputs(settings: dict):
        return record_inputs(f.tiny_record(settings, layout=unstated))

    assert inputs({"dp_bucket_elements": 134_217_728})[2].dp_bucket_elements == 134_217_728
    assert inputs({})[2].dp_bucket_elements is None
    with pytest.raises((InvalidInput, ValueError), match="dp_bucket_elements"):
        inputs({"dp_bucket_elements": 0})


@pytest.mark.parametrize(
    "fields",
    [
        {"dp": 16, "zero_stage": 1},
        {"dp": 8, "pp": 2, "zero_stage": 1},
        {"dp": 8, "pp": 2, "vp": 2, "zero_stage": 1, "micro_batch": 1},
        {"dp": 16, "zero_stage": 3},
        {"dp": 16, "zero_stage": 0},
        {"tp": 8, "pp": 2, "zero_stage": 1},
    ],
)
def test_dp_exposure_adds_up_to_the_priced_dp_term(fields) -> None:
    """Estimate.dp_exposure splits breakdown dp_comm by cause, exactly (the stage's exposed DP
    is the sum of stage_dp_parts' parts), for the stage that sets it; None where nothing is
    exposed."""
    lo = Layout(**fields)
    e = estimate(f.dense_model(num_layers=8), f.cluster(16), f.workload(global_batch=32), lo)
    d = e.dp_exposure
    if e.breakdown_s["dp_comm"] == 0.0:
        assert d is None
        return
    parts = ("beyond_overlap_window_s", "last_gradient_bucket_s", "first_parameter_bucket_s")
    total = sum(d[k] for k in parts) + d["compute_slowed_beside_nccl_s"]
    assert total == e.breakdown_s["dp_comm"]
    assert d["link_busy_s"] == e.comm_total_s["dp"] or lo.pp > 1
    assert 0 <= d["stage"] < lo.pp and all(d[k] >= 0 for k in parts)


def test_cli_explain_and_json_carry_the_dp_exposure(capsys) -> None:
    """`estimate --json` carries dp_exposure; `--explain` prints it as one line whose figures
    are the JSON's."""
    argv = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64"]
    argv += ["--global-batch", "64", "--tp", "1", "--pp", "1", "--dp", "64"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["dp_exposure"]
    assert d["stage"] == 0 and d["last_gradient_bucket_s"] > 0 and d["first_parameter_bucket_s"] > 0
    assert main([*argv, "--explain"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        f"{d['last_gradient_bucket_s']:.3f} the last gradient bucket and "
        f"{d['first_parameter_bucket_s']:.3f} the first parameter bucket"
    ) in text
    assert f"{d['compute_slowed_beside_nccl_s']:.3f} compute slowed beside the hidden NCCL" in text


def test_cost_model_doc_quotes_the_dp_exposure_example(capsys) -> None:
    """docs/cost_model.md#dp-edge-buckets quotes this command's dp_exposure."""
    argv = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64"]
    argv += ["--global-batch", "64", "--tp", "1", "--pp", "1", "--dp", "64", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    d = out["dp_exposure"]
    doc = Path(__file__).resolve().parents[3] / "docs" / "cost_model.md"
    text = " ".join(doc.read_text().split())
    assert (
        f"{out['breakdown_s']['dp_comm']:.3f} s exposed of {d['link_busy_s']:.3f} s on the links, "
        f"{d['last_gradient_bucket_s']:.3f} s the last gradient bucket, "
        f"{d['first_parameter_bucket_s']:.3f} s the first parameter bucket and "
        f"{d['compute_slowed_beside_nccl_s']:.3f} s the slowed compute"
    ) in text
