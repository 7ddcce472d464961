"""Activation tensors per framework and recompute mode, computed by hand (docs/cost_model.md
#activation-tensors). Sizes are per token on one GPU in bytes unless a test says otherwise."""

from __future__ import annotations

import pytest

from cost_models.calibration import calibration_for
from cost_models.compute import layer_time
from cost_models.estimate import estimate
from cost_models.memory import (
    GIB,
    layer_activation_bytes,
    layer_activation_tensors,
    memory_config,
)
from cost_models.pipeline import inflight_chunks
from cost_models.specs import Layout, ModelSpec
from tests.factories import H100, cluster, dense_model, moe_model, workload

# GPT-3-like: MHA, 4h GeLU MLP, residual dropout (Korthikanti et al. 2022's setting).
GPT = {
    "name": "gpt-test",
    "num_layers": 8,
    "hidden_size": 1024,
    "ffn_hidden_size": 4096,
    "num_attention_heads": 16,
    "vocab_size": 32000,
    "gated_mlp": False,
    "hidden_dropout": True,
}


def tensors(model, w, lo, *, is_moe=False, recompute=None):
    got = layer_activation_tensors(model, w, lo, is_moe=is_moe, recompute=recompute or lo.recompute)
    return {x.name: x.bytes_per_token for x in got}


def test_megatron_selective_core_attn_is_korthikanti_34_sbh_over_t():
    # Table 2 of arXiv 2205.05198, SP + selective: 34 s*b*h/t bytes per layer, plus the flash
    # attention LSE (fp32 per head) that the paper's unfused softmax did not have.
    m, w = ModelSpec(**GPT), workload(seq_len=2048)
    lo = Layout(tp=4, sequence_parallel=True, recompute="selective")
    h, t = 1024, 4
    got = tensors(m, w, lo)
    assert got == {
        "input_norm_in": 2 * h / t,  # LN input 2sbh/t
        "input_norm_out": 2 * h / t,  # QKV GEMM input 2sbh/t
        "q_k_v": 6 * h / t,  # Q, K (4sbh/t) and V (2sbh/t)
        "attn_out": 2 * h / t,  # projection input 2sbh/t
        "attn_dropout_mask": h / t,  # sbh/t
        "mlp_norm_in": 2 * h / t,
        "mlp_norm_out": 2 * h / t,  # fc1 input
        "fc1_out": 8 * h / t,  # GeLU input 8sbh/t
        "act_out": 8 * h / t,  # fc2 input 8sbh/t
        "mlp_dropout_mask": h / t,
    }
    assert sum(got.values()) == 34 * h / t
    per_layer = layer_activation_bytes(m, w, lo, is_moe=False, recompute="selective")
    assert per_layer == 2048 * 34 * h / t
    # No recompute adds only the softmax statistics: flash attention never stores s x s scores.
    none = tensors(m, w, lo.model_copy(update={"recompute": "none"}))
    assert none == {**got, "softmax_lse": 16 / t * 4}


def test_megatron_selective_modules_drop_their_tensors():
    m, w = ModelSpec(**GPT), workload(seq_len=2048)
    h, t = 1024, 4
    base = Layout(tp=4, sequence_parallel=True, recompute="selective")
    core = tensors(m, w, base)
    with_norms = base.model_copy(update={"recompute_modules": ("core_attn", "layernorm")})
    # Transformer Engine's spec (fused_elementwise) fuses both norms of a dense layer into
    # linear_qkv / linear_fc1: IdentityOp modules, which `layernorm` does not recompute
    # (transformer_layer.py core_v0.19.0): nothing is dropped.
    assert tensors(m, w, with_norms) == core
    local = workload(seq_len=2048, fused_elementwise=False)  # the local spec: norms of their own
    norm = tensors(m, local, with_norms)
    assert set(tensors(m, local, base)) - set(norm) == {"input_norm_out", "mlp_norm_out"}
    assert sum(tensors(m, local, base).values()) - sum(norm.values()) == 4 * h / t
    # a MoE layer keeps its pre-MLP norm as a module (TENorm: the router reads its output)
    moe = moe_model()
    moe_core = tensors(moe, w, base, is_moe=True)
    moe_norm = tensors(moe, w, with_norms, is_moe=True)
    assert set(moe_core) - set(moe_norm) == {"mlp_norm_out"}
    mlp = tensors(m, w, base.model_copy(update={"recompute_modules": ("core_attn", "mlp")}))
    assert set(core) - set(mlp) == {"fc1_out", "act_out"}
    assert sum(mlp.values()) == 18 * h / t  # 34 - 16: the MLP keeps only its input
    # Without core_attn the LSE stays.
    only_norm = tensors(m, w, base.model_copy(update={"recompute_modules": ("layernorm",)}))
    assert only_norm["softmax_lse"] == 16 / t * 4


def test_full_recompute_keeps_the_layer_input_and_rebuilds_groups():
    m, w = ModelSpec(**GPT), workload(seq_len=2048, global_batch=8)
    h, t, s = 1024, 4, 2048
    lo = Layout(tp=4, pp=2, dp=1, sequence_parallel=True, recompute="full")
    assert tensors(m, w, lo) == {"layer_input": 2 * h / t}
    none = layer_activation_bytes(m, w, lo, is_moe=False, recompute="none")
    c = cluster(8)
    e = estimate(m, c, w, lo)
    # Stage 0: 4 layers x 2 in-flight micro-batches of inputs, one layer rebuilt.
    assert e.stage_memory[0].activations_gib * GIB == pytest.approx(4 * 2 * s * 2 * h / t + none)
    # Uniform groups of 2: one input per group, two layers rebuilt at once.
    uni = lo.model_copy(update={"recompute_method": "uniform", "recompute_num_layers": 2})
    e = estimate(m, c, w, uni)
    assert e.stage_memory[0].activations_gib * GIB == pytest.approx(
        2 * 2 * s * 2 * h / t + 2 * none
    )
    # Block 1: the first layer of the chunk checkpointed, the other 3 keep everything.
    blk = lo.model_copy(update={"recompute_method": "block", "recompute_num_layers": 1})
    e = estimate(m, c, w, blk)
    assert e.stage_memory[0].activations_gib * GIB == pytest.approx(
        2 * (s * 2 * h / t + 3 * none) + none
    )
    # Its recompute time is one layer's forward per micro-batch, a quarter of full recompute.
    full = estimate(m, c, w, lo)
    assert e.breakdown_s["recompute"] == pytest.approx(full.breakdown_s["recompute"] / 4)


def test_moe_tensors_and_modules():
    m = moe_model()  # h 2048, 16 experts top-2 of width 1024, 1 shared expert, gated
    w = workload(seq_len=4096)
    lo = Layout(tp=2, sequence_parallel=True, recompute="selective")
    got = tensors(m, w, lo, is_moe=True)
    rows = 2 / 2  # top-2 copies of each token, split over 2 TP ranks (etp 1)
    assert got["router_logits_probs"] == 2 * 16 / 2 * 4  # fp32 logits + probs, SP tokens
    assert got["permuted_tokens"] == rows * 2048 * 2
    assert got["expert_fc1_out"] == rows * 2 * 1024 * 2  # gate + up
    assert got["expert_act_out"] == rows * 1024 * 2
    assert got["shared_fc1_out"] == 2 * 1024 / 2 * 2
    assert got["shared_act_out"] == 1024 / 2 * 2
    act = tensors(m, w, lo.model_copy(update={"recompute_modules": ("moe_act",)}), is_moe=True)
    assert set(got) - set(act) == {"expert_act_out"}  # (and core_attn off: the LSE stays)
    assert "softmax_lse" in act
    shared = tensors(
        m, w, lo.model_copy(update={"recompute_modules": ("shared_experts",)}), is_moe=True
    )
    assert set(got) - set(shared) == {"shared_fc1_out", "shared_act_out"}
    whole = tensors(m, w, lo.model_copy(update={"recompute_modules": ("moe",)}), is_moe=True)
    assert not {"permuted_tokens", "expert_fc1_out", "router_logits_probs"} & set(whole)
    assert "mlp_norm_out" in whole  # the checkpointed MoE layer's input


def test_mla_up_projection_recompute_drops_q_k_v():
    m = dense_model(mla=True, num_kv_heads=None)
    w = workload(seq_len=4096)
    lo = Layout(tp=4, sequence_parallel=True, recompute="selective")
    got = tensors(m, w, lo)
    # DeepSeek-V3 MLA dims: 32 heads / 4 of (2 x (128 + 64) + 128) elements, bf16.
    assert got["q_k_v"] == 8 * (2 * 192 + 128) * 2
    assert got["mla_latents"] == (1536 + 512 + 64) * 2
    assert got["mla_latents_normed"] == (1536 + 512) * 2
    up = tensors(m, w, lo.model_copy(update={"recompute_modules": ("core_attn", "mla_up_proj")}))
    assert set(got) - set(up) == {"q_k_v"}


def test_fp8_saved_inputs_per_framework():
    m = dense_model()
    lo = Layout(tp=1, recompute="none")
    bf16 = tensors(m, workload(), lo)
    te = tensors(m, workload(precision="fp8"), lo)
    # Transformer Engine saves fp8 copies of GEMM inputs (1 B) and keeps the bf16 attention
    # output for flash attention's backward beside the projection's fp8 copy.
    assert te["input_norm_out"] == bf16["input_norm_out"] / 2
    assert te["act_out"] == bf16["act_out"] / 2
    assert te["attn_out_fp8"] == bf16["attn_out"] / 2
    # torchao (torchtitan) saves the bf16 input and re-casts in backward.
    ao = tensors(m, workload(precision="fp8", selective_recompute="every_other_matmul"), lo)
    assert ao == bf16


def test_interleaved_first_stage_matches_megatron_inflight_factor():
    # Megatron's estimator: num_layers x (1 + (p-1)/(p*v)) layers of activations on stage 0.
    p, v = 4, 2
    lo = Layout(pp=p, vp=v)
    layers_per_rank = 16 / p
    assert inflight_chunks(lo, 0, 64) * layers_per_rank == 16 * (1 + (p - 1) / (p * v))


def test_gpt3_175b_stage0_within_5pct_of_megatron_estimator():
    """The issue's layout: TP4 PP8 DP32 VP6 mb2 selective SP ZeRO-1, seq 2048, batch 1536."""
    import models_zoo

    m = models_zoo.load_model("gpt3-175b")
    c = models_zoo.load_cluster("dgx-a100", 1024)
    w = workload(seq_len=2048, global_batch=1536)
    lo = Layout(
        tp=4, pp=8, dp=32, vp=6, micro_batch=2, recompute="selective", sequence_parallel=True
    )
    e = estimate(m, c, w, lo)
    s, b, h, L, t, p, v = 2048, 2, 12288, 96, 4, 8, 6
    # megatron/training/theoretical_memory_usage.py compute_activation_memory (SP + selective)
    acts = (s * b * h * (18 + 4 * 4) * L + 8 * s * b * p + s * b * h * p) * (1 + (p - 1) / (p * v))
    acts /= t
    stage0 = e.stage_memory[0]
    assert stage0.activations_gib * GIB == pytest.approx(acts, rel=0.05)
    # compute_weight_and_optimizer_memory: (6 + 12/dp) bytes per parameter on the most loaded
    # shard (L/p layers of 12h^2 + 13h and the padded embedding, over TP).
    vocab = 50688  # 50257 padded to a multiple of 128 * tp (--make-vocab-size-divisible-by)
    params = ((12 * h * h + 13 * h) * L / p + vocab * h) / t
    states = (stage0.weights_gib + stage0.gradients_gib + stage0.optimizer_gib) * GIB
    assert states == pytest.approx(params * (6 + 12 / 32), rel=0.05)
    assert not e.fits_in_memory  # ~83 GiB with buffers and reserve on an 80 GiB A100
    assert memory_config(m, w, lo) == ("megatron", "selective:core_attn", True, False)
    assert not e.memory_validated


def test_selective_module_time_is_the_sum_of_module_forwards():
    m = dense_model()
    w = workload()
    lo = Layout(tp=2, sequence_parallel=True, recompute="selective")
    lt = layer_time(m, H100, calibration_for("hopper"), w, lo, is_moe=False)
    times = dict(lt.module_s)
    assert lt.recompute_s("selective") == times["core_attn"] == lt.attention_s
    both = lt.recompute_s("selective", ("core_attn", "layernorm", "mlp"))
    assert both == pytest.approx(times["core_attn"] + times["layernorm"] + times["mlp"])
    assert times["layernorm"] < times["core_attn"] < times["mlp"] < lt.forward_s
    # the norms are fused into TE's linear_qkv / linear_fc1 there: `layernorm` reruns none;
    # under the local spec it reruns both, in a MoE layer under TE only the pre-MLP norm
    assert times["layernorm"] == 0.0
    local = workload(fused_elementwise=False)
    both = dict(layer_time(m, H100, calibration_for("hopper"), local, lo, is_moe=False).module_s)
    assert both["layernorm"] > 0.0
    moe = moe_model()
    one = dict(layer_time(moe, H100, calibration_for("hopper"), w, lo, is_moe=True).module_s)
    two = dict(layer_time(moe, H100, calibration_for("hopper"), local, lo, is_moe=True).module_s)
    assert 0.0 < one["layernorm"] < two["layernorm"]


def test_modules_the_model_lacks_are_refused():
    from cost_models.rules import layout_violations

    lo = Layout(dp=8, recompute="selective", recompute_modules=("core_attn", "mla_up_proj"))
    assert layout_violations(dense_model(), cluster(8), workload(), lo) == [
        "recompute module mla_up_proj needs multi-latent attention"
    ]
    lo = lo.model_copy(update={"recompute_modules": ("moe_act",)})
    assert layout_violations(dense_model(), cluster(8), workload(), lo) == [
        "recompute module moe_act needs a mixture-of-experts model"
    ]
