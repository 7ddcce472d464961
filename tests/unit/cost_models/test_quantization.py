"""FP8 / FP4 recipes (issue 32 item 4): each recipe's quantization as memory-bound HBM traffic,
NVFP4 GEMMs at the NVFP4 peak, refused on GPUs without it. Expected values by hand."""

from __future__ import annotations

import pytest
from factories import H100, cluster, dense_model, layout, workload

from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import (
    QUANT_BYTES_PER_ELEMENT,
    Gemm,
    gemm_hardware,
    layer_time,
    quant_recipe,
    quantize_s,
)
from cost_models.errors import InvalidInput


def test_recipe_bytes_per_element_by_hand():
    # read bf16 2 B + row-wise and column-wise copies
    assert QUANT_BYTES_PER_ELEMENT["delayed"] == 4  # + 1 + 1 fp8
    assert QUANT_BYTES_PER_ELEMENT["tensorwise"] == 6  # + the amax pass, 2 B
    assert QUANT_BYTES_PER_ELEMENT["blockwise"] == pytest.approx(4 + 8 / 128)  # fp32 per 128
    assert QUANT_BYTES_PER_ELEMENT["mxfp8"] == pytest.approx(4 + 2 / 32)  # E8M0 per 32
    assert QUANT_BYTES_PER_ELEMENT["nvfp4"] == pytest.approx(2 + 2 + 1 + 2 / 16)  # E4M3 per 16


def test_recipe_of_a_workload():
    assert quant_recipe(workload()) is None
    assert quant_recipe(workload(precision="fp8")) == "delayed"
    assert quant_recipe(workload(precision="fp8", fp8_dynamic_scaling=True)) == "tensorwise"
    assert quant_recipe(workload(precision="fp8", fp8_recipe="blockwise")) == "blockwise"
    assert quant_recipe(workload(precision="mxfp8")) == "mxfp8"
    assert quant_recipe(workload(precision="nvfp4")) == "nvfp4"


def test_quantize_seconds_by_hand():
    # one fp8 GEMM [1000 x 300] x [300 x 200] and a bf16 router (not quantized) at 1e9 B/s:
    # forward input 1000*300 elements, output gradient 1000*200, 4 B each (delayed)
    gemms = [Gemm(1000, 200, 300), Gemm(1000, 64, 300, fp8_capable=False)]
    fwd, bwd = quantize_s(gemms, workload(precision="fp8"), 1e9)
    assert fwd == pytest.approx(300_000 * 4 / 1e9)
    assert bwd == pytest.approx(200_000 * 4 / 1e9)
    # torchao (torchtitan's op-level recompute policy marks it) re-quantizes the saved bf16
    # input in backward: the input's bytes once more
    tt = workload(
        precision="fp8", fp8_dynamic_scaling=True, selective_recompute="every_other_matmul"
    )
    fwd, bwd = quantize_s(gemms, tt, 1e9)
    assert fwd == pytest.approx(300_000 * 6 / 1e9)
    assert bwd == pytest.approx((200_000 + 300_000) * 6 / 1e9)
    assert quantize_s(gemms, workload(), 1e9) == (0.0, 0.0)


def test_layer_time_carries_the_quantization_in_both_passes():
    model, lo = dense_model(), layout(tp=2)
    cal = calibration_for("hopper")
    bf = layer_time(model, H100, cal, workload(), lo, is_moe=False)
    fp = layer_time(model, H100, cal, workload(precision="fp8"), lo, is_moe=False)
    assert bf.quantize_s == 0 and fp.quantize_s > 0 and fp.quantize_backward_s > 0
    # the same elementwise traffic in both (the casts are a term of their own)
    assert fp.elementwise_s == bf.elementwise_s
    hbm = hbm_bytes_per_s(H100, cal)
    t = 4096  # tokens per micro-batch (seq 4096, mb 1)
    h = model.hidden_size
    # forward inputs: QKV, proj, FC1 read [t, h], [t, n_h*d/tp], [t, h]; FC2 [t, ffn/tp];
    # delayed scaling on Hopper, 4 B each, but QKV and FC1 read a norm's output and TE's norm
    # writes their fp8 itself (their 2 B bf16 read is gone): 2 B
    d = model.attn_head_dim
    plain = t * (model.num_attention_heads * d / 2 + model.ffn_hidden_size / 2)
    assert fp.quantize_s == pytest.approx((plain * 4 + 2 * t * h * 2) / hbm)
    assert fp.forward_s == pytest.approx(
        fp.gemm_s + fp.attention_s + fp.elementwise_s + fp.overhead_s + fp.quantize_s
    )


def test_nvfp4_runs_at_the_fp4_peak_and_is_refused_without_it():
    b200 = H100.model_copy(
        update={"generation": "blackwell", "peak_fp4_tflops": 2 * H100.peak_fp8_tflops}
    )
    gpu, book = gemm_hardware(b200, workload(precision="nvfp4"), None)
    assert gpu.peak_fp8_tflops == b200.peak_fp4_tflops and book is None
    assert gemm_hardware(b200, workload(precision="fp8"), None)[0] is b200
    with pytest.raises(InvalidInput, match="nvfp4 needs NVFP4 tensor cores"):
        gemm_hardware(H100, workload(precision="nvfp4"), None)
    cal = calibration_for("blackwell")
    lo, model = layout(tp=1), dense_model()
    fp8 = layer_time(model, b200, cal, workload(precision="fp8"), lo, is_moe=False)
    fp4 = layer_time(model, b200, cal, workload(precision="nvfp4"), lo, is_moe=False)
    # peak fp4 = 2 x peak fp8 of this GPU, same curve: the GEMMs take half the time
    assert fp4.gemm_s == pytest.approx(fp8.gemm_s / 2, rel=1e-9)
    assert cluster().gpu.peak_fp4_tflops is None


def test_cuda_graphs_remove_launch_and_routing_overhead_not_expert_launches():
    from factories import moe_model

    from cost_models.compute import layer_overhead_s

    cal = calibration_for("hopper")
    model, lo = moe_model(), layout(ep=4)
    local = model.moe.num_experts / 4
    eager = layer_overhead_s(model, lo, cal, workload(), is_moe=True)
    graphed = layer_overhead_s(model, lo, cal, workload(cuda_graphs=True), is_moe=True)
    experts = 3 * local * cal.expert_gemm_overhead_s
    assert eager == pytest.approx(cal.kernel_overhead_s + cal.moe_layer_overhead_s + experts)
    assert graphed == pytest.approx(experts)
    assert layer_overhead_s(model, lo, cal, workload(cuda_graphs=True), is_moe=False) == 0.0


def test_forced_balance_routing_prices_the_mean_load():
    # Megatron --moe-router-force-load-balancing: the busiest rank carries the mean, not 1.15x
    from factories import moe_model

    from cost_models.compute import moe_gemms, moe_imbalance
    from cost_models.stage import ep_exchange_s

    assert moe_imbalance(workload()) == 1.15
    assert moe_imbalance(workload(moe_force_balance=True)) == 1.0
    model, lo, cl = moe_model(), layout(dp=8, ep=4), cluster(8)
    cal = calibration_for("hopper")
    even = layer_time(model, H100, cal, workload(moe_force_balance=True), lo, is_moe=True)
    aux = layer_time(model, H100, cal, workload(), lo, is_moe=True)
    grouped = [g for g in moe_gemms(model, 4096, lo) if g.grouped]
    from cost_models.compute import gemm_time_s

    grouped_s = gemm_time_s(grouped, H100, cal, False)  # at 1.15
    assert aux.gemm_s - even.gemm_s == pytest.approx(grouped_s * (1 - 1 / 1.15), rel=1e-9)
    span = [4]  # EP 4 inside the NVLink tier
    d_aux, c_aux, _ = ep_exchange_s(model, cl, workload(), lo, span + [4])
    d_even, c_even, _ = ep_exchange_s(model, cl, workload(moe_force_balance=True), lo, span + [4])
    # the bytes shrink by 1.15, the per-message latency does not
    assert d_aux / 1.15 < d_even < d_aux and c_aux / 1.15 < c_even < c_aux


def test_grouped_expert_gemms_launch_once_per_projection_not_per_expert():
    from factories import moe_model

    from cost_models.compute import layer_overhead_s
    from cost_models.framework import profile

    cal = calibration_for("hopper")
    model, lo = moe_model(), layout(ep=2)
    local = model.moe.num_experts / 2
    fixed = cal.kernel_overhead_s + cal.moe_layer_overhead_s
    per_expert = layer_overhead_s(model, lo, cal, workload(), is_moe=True)
    grouped = layer_overhead_s(
        model, lo, cal, workload(expert_gemm_launch="grouped"), is_moe=True
    )
    # 3 GEMM launches per pass on average (forward 2-3, backward twice as many), each one
    # host launch: per local expert under Transformer Engine, once under torch._grouped_mm
    assert per_expert == pytest.approx(fixed + 3 * local * cal.expert_gemm_overhead_s)
    assert grouped == pytest.approx(fixed + 3 * cal.expert_gemm_overhead_s)
    # the framework profiles say which (with their source)
    assert profile("torchtitan").workload(workload()).expert_gemm_launch == "grouped"
    assert profile("megatron").workload(workload()).expert_gemm_launch == "per_expert"
    stated = workload(expert_gemm_launch="per_expert")
    assert profile("torchtitan").workload(stated).expert_gemm_launch == "per_expert"
