"""FP8 / FP4 recipes (issue 32 item 4): each recipe's quantization as memory-bound HBM traffic,
NVFP4 GEMMs at the part's measured NVFP4 rate or its NVFP4 peak, refused on GPUs without it. Expected values by hand."""

from __future__ import annotations

import pytest
from factories import H100, cluster, dense_model, layout, workload

import models_zoo
from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import (
    QUANT_BYTES_PER_ELEMENT,
    Gemm,
    gemm_hardware,
    gemm_time_s,
    layer_time,
    quant_recipe,
    quantize_s,
)
from cost_models.errors import InvalidInput
from cost_models.specs import GpuSpec
from models_zoo.provenance import gpu_constants


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


def test_nvfp4_runs_at_a_measured_rate_over_fp8_where_the_part_has_one():
    # GpuSpec.fp4_gemm_speed: per-tensor fp8 GEMM time / NVFP4 GEMM time on the part (TE's B300
    # profile: 6.812 / 3.764 ms per layer = 1.81); the GEMMs run at the fp8 efficiency on
    # peak_fp8 x 1.81, not on the datasheet fp4 peak (3 x fp8 here)
    measured = {"over_fp8": 1.81, "source": "hand-made test input"}
    part = H100.model_copy(
        update={"generation": "blackwell", "peak_fp4_tflops": 3 * H100.peak_fp8_tflops}
    )
    part = GpuSpec.model_validate({**part.model_dump(), "fp4_gemm_speed": measured})
    gpu, book = gemm_hardware(part, workload(precision="nvfp4"), None)
    assert gpu.peak_fp8_tflops == pytest.approx(1.81 * part.peak_fp8_tflops) and book is None
    cal = calibration_for("blackwell")
    lo, model = layout(tp=1), dense_model()
    fp8 = layer_time(model, part, cal, workload(precision="fp8"), lo, is_moe=False)
    fp4 = layer_time(model, part, cal, workload(precision="nvfp4"), lo, is_moe=False)
    assert fp4.gemm_s == pytest.approx(fp8.gemm_s / 1.81, rel=1e-9)
    # without the measurement: the datasheet ratio, 3x
    bare = part.model_copy(update={"fp4_gemm_speed": None})
    fp4_bare = layer_time(model, bare, cal, workload(precision="nvfp4"), lo, is_moe=False)
    assert fp4_bare.gemm_s == pytest.approx(fp8.gemm_s / 3, rel=1e-9)


@pytest.mark.parametrize(
    ("update", "rule"),
    [
        ({"fp4_gemm_speed": {"over_fp8": 3.5, "source": "x"}}, "above the datasheet ratio"),
        ({"fp4_gemm_speed": {"over_fp8": 1.0, "source": "x"}}, "greater than 1"),
        ({"fp4_gemm_speed": {"over_fp8": 1.8, "source": ""}}, "at least 1 character"),
        ({"fp4_gemm_speed": {"over_fp8": 1.8, "source": "x", "carried_from": ""}},
         "at least 1 character"),
        ({"fp4_gemm_speed": {"over_fp8": 1.8, "source": "x", "measured_on": "b300"}},
         "Extra inputs are not permitted"),
        ({"fp4_gemm_speed": {"over_fp8": 1.8, "source": "x"}, "peak_fp4_tflops": None},
         "peak_fp4_tflops or peak_fp8_tflops is null"),
    ],
)
def test_fp4_gemm_speed_is_checked(update, rule):
    data = {**H100.model_dump(), "generation": "blackwell", "peak_fp4_tflops": 3 * 1978.9}
    with pytest.raises(ValueError, match=rule):
        GpuSpec.model_validate({**data, **update})


def test_blackwell_presets_carry_the_b300s_measured_nvfp4_rate():
    # the B300 carries TE's own B300 figure (6.812 / 3.764); B200, GB200 and GB300 carry it over
    # by aiconfigurator's part-to-part quotient on the same 12 shapes (bench/aic_fp4_speed.py:
    # trtllm 1.3.0rc20 fp8 / nvfp4 1.323, 1.371, 1.398 against the B300's 1.470), each below the
    # datasheet ratio; a part without the field keeps the datasheet ratio, an assumption
    b300 = models_zoo.load_gpu("b300")
    assert b300.fp4_gemm_speed.over_fp8 == 1.81 and b300.fp4_gemm_speed.carried_from is None
    assert "6.812" in b300.fp4_gemm_speed.source and "3.764" in b300.fp4_gemm_speed.source
    carried = {"b200": (1.323, 1.63), "gb200": (1.371, 1.69), "gb300": (1.398, 1.72)}
    for gpu_id, (speed, rate) in carried.items():
        gpu = models_zoo.load_gpu(gpu_id)
        assert gpu.fp4_gemm_speed.carried_from == "b300"
        assert gpu.fp4_gemm_speed.over_fp8 == rate == round(6.812 / 3.764 * speed / 1.470, 2)
        assert f"{speed:.3f} here vs 1.470 on the B300" in gpu.fp4_gemm_speed.source
        assert rate < gpu.peak_fp4_tflops / gpu.peak_fp8_tflops
    for gpu_id in ("b300", *carried):
        row = next(r for r in gpu_constants(models_zoo.load_gpu(gpu_id))
                   if r["constant"] == "fp4_gemm_speed.over_fp8")  # fmt: skip
        assert row["basis"] == "measured"
    bare = models_zoo.load_gpu("b200").model_copy(update={"fp4_gemm_speed": None})
    row = next(r for r in gpu_constants(bare) if r["constant"] == "fp4_gemm_speed.over_fp8")
    assert (row["value"], row["basis"]) == (2.0, "assumption")
    h100 = models_zoo.load_gpu("h100-sxm-80gb")
    assert not [r for r in gpu_constants(h100) if r["constant"].startswith("fp4_gemm_speed")]


def test_block_scaled_fp8_gemms_run_slower_than_per_tensor_on_blackwell():
    # TE's own B300 measurement (gemm_profiling.rst, pre-quantized): 6.812 ms per layer of
    # per-tensor fp8 GEMMs vs 7.161 ms MXFP8 on the same shapes
    b200 = H100.model_copy(update={"generation": "blackwell"})
    cal = calibration_for("blackwell")
    dense, grouped = Gemm(8192, 4096, 4096), Gemm(8192, 1536, 4096, count=16, grouped=True)
    router = Gemm(8192, 64, 4096, fp8_capable=False)

    def seconds(g: Gemm, **w) -> float:
        gpu, book = gemm_hardware(b200, workload(**w), None)
        return gemm_time_s([g], gpu, cal, True, book)

    per_tensor = seconds(dense, precision="fp8", fp8_recipe="tensorwise")
    assert seconds(dense, precision="fp8") == per_tensor  # delayed: the same GEMM kernel
    assert seconds(dense, precision="mxfp8") == pytest.approx(per_tensor * 7.161 / 6.812)
    # FP8 block scaling is emulated with MXFP8 GEMMs on Blackwell (TE gemm.cpp)
    assert seconds(dense, precision="fp8", fp8_recipe="blockwise") == pytest.approx(
        per_tensor * 7.161 / 6.812
    )
    # not measured: grouped expert GEMMs and bf16 GEMMs keep their speed
    assert seconds(grouped, precision="mxfp8") == seconds(grouped, precision="fp8")
    assert seconds(router, precision="mxfp8") == seconds(router, precision="fp8")
    # no (per-tensor) fp8 table row stands for an MXFP8 GEMM; Hopper has no measurement
    book = object()
    assert gemm_hardware(b200, workload(precision="mxfp8"), book)[1] is None  # type: ignore[arg-type]
    hopper_blockwise = workload(precision="fp8", fp8_recipe="blockwise")
    assert gemm_hardware(H100, hopper_blockwise, book) == (H100, book)  # type: ignore[arg-type]


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

    assert moe_imbalance(workload(), 4) == 1.15
    assert moe_imbalance(workload(moe_force_balance=True), 4) == 1.0
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


def test_cast_bytes_by_recipe_and_gpu_by_hand():
    from cost_models.compute import quant_bytes, quant_copies

    # per-tensor fp8 on Blackwell writes one copy (non-TN fp8 GEMMs): read 2 + write 1
    assert quant_copies("delayed", "blackwell") == 1 and quant_copies("delayed", "hopper") == 2
    assert quant_copies("tensorwise", "blackwell") == 1 and quant_copies("mxfp8", "blackwell") == 2
    assert quant_bytes("delayed", 1) == 3
    assert quant_bytes("tensorwise", 1) == 5  # + the 2 B amax pass
    # NVFP4: amax pass 2 + read 2 + two 0.5 B copies with an E4M3 scale per 16
    assert quant_bytes("nvfp4", 2) == pytest.approx(2 + 2 + 2 * (0.5 + 1 / 16))


def test_sequence_parallel_casts_on_the_local_shard_by_hand():
    from cost_models.compute import operand_quant_bytes

    rows, cols = 8192, 8192
    # NVFP4, gathered operand, TP 4: cast on 2,048 rows (fused RHT kernel: 2048 % 64, 8192 % 128),
    # then the gathered column-wise copy (0.5 B + 1/16 B scales) reordered: read + write
    assert operand_quant_bytes(rows, cols, True, "nvfp4", "blackwell", 4, True) == pytest.approx(
        2048 * 8192 * 5.125 + 8192 * 8192 * 2 * 0.5625
    )
    # not gathered (a row-parallel input): all rows
    assert operand_quant_bytes(rows, cols, False, "nvfp4", "blackwell", 4, True) == pytest.approx(
        8192 * 8192 * 5.125
    )
    # 2,880 columns (gpt-oss hidden) miss the fused kernel's 128: +6 B (read, write, read)
    assert operand_quant_bytes(rows, 2880, False, "nvfp4", "blackwell", 1, True) == pytest.approx(
        8192 * 2880 * 11.125
    )
    # delayed on Hopper, gathered, TP 2: row-wise cast of 4,096 rows (3 B), then the transpose of
    # the gathered 8,192 rows (read 1 + write 1)
    assert operand_quant_bytes(rows, cols, True, "delayed", "hopper", 2, True) == pytest.approx(
        4096 * 8192 * 3 + 8192 * 8192 * 2
    )
    # on Blackwell no transpose
    assert operand_quant_bytes(
        rows, cols, True, "delayed", "blackwell", 2, True
    ) == pytest.approx(4096 * 8192 * 3)
    # torchao (not Transformer Engine): the two-copy figure on all rows
    assert operand_quant_bytes(rows, cols, True, "delayed", "blackwell", 1, False) == 8192**2 * 4


def test_amax_all_reduces_per_layer_by_hand():
    from factories import moe_model

    from cost_models.compute import amax_reductions

    model, sp = dense_model(), layout(tp=2, sequence_parallel=True)
    # QKV and FC1 inputs (forward), projection and FC2 output gradients (backward)
    assert amax_reductions(model, sp, workload(precision="nvfp4"), False) == (2, 2)
    current = workload(precision="fp8", fp8_recipe="tensorwise")
    assert amax_reductions(model, sp, current, False) == (2, 2)
    for w in (workload(precision="mxfp8"), workload(precision="fp8")):  # block / delayed: none
        assert amax_reductions(model, sp, w, False) == (0, 0)
    assert amax_reductions(model, layout(tp=2), workload(precision="nvfp4"), False) == (0, 0)
    # a MoE layer: the attention block's and the shared expert's; the routed experts none
    assert amax_reductions(moe_model(), sp, workload(precision="nvfp4"), True) == (2, 2)
    moe = moe_model().moe.model_copy(update={"num_shared_experts": 0})
    alone = moe_model().model_copy(update={"moe": moe})
    assert amax_reductions(alone, sp, workload(precision="nvfp4"), True) == (1, 1)


def test_amax_all_reduces_are_exposed_tp_latency():
    from cost_models.commtable import collective_time_s
    from cost_models.stage import _tp_layer_s

    model, cl = dense_model(), cluster(8)
    cal = calibration_for("hopper")
    sp = layout(tp=2, dp=4, sequence_parallel=True)
    span = {"tp": [2, 2]}
    cur = workload(precision="fp8", fp8_recipe="tensorwise")
    dly = workload(precision="fp8")
    lt = layer_time(model, cl.gpu, cal, cur, sp, is_moe=False)
    a = _tp_layer_s(model, cl, cal, cur, sp, lt, span, False)
    b = _tp_layer_s(model, cl, cal, dly, sp, lt, span, False)
    one = collective_time_s("all_reduce", 8, [2, 2], cl.tiers)
    assert a[0] - b[0] == pytest.approx(4 * one) and a[1] - b[1] == pytest.approx(4 * one)


def test_nvfp4_cast_kernels_by_hand():
    from cost_models.host import layer_launches

    model, lo = dense_model(), layout()
    fp8 = layer_launches(model, lo, workload(precision="mxfp8"), "mxfp8", False)
    fp4 = layer_launches(model, lo, workload(precision="nvfp4"), "nvfp4", False)
    # 4 linears: NVFP4's amax kernel forward (+1 each), amax + Philox seed backward (+2 each)
    assert fp4.forward - fp8.forward == 4 and fp4.backward - fp8.backward == 8


def test_bf16_layers_at_start_and_end():
    from cost_models.pricer import Pricer

    model, cl = dense_model(), cluster(8)
    lo = layout(pp=4, dp=2)
    plain = Pricer(model, cl, workload(precision="mxfp8", global_batch=64))
    kept = Pricer(
        model, cl, workload(precision="mxfp8", global_batch=64, bf16_layers_start=2,
                            bf16_layers_end=3)
    )  # fmt: skip
    # 32 layers on 4 ranks of 8: layers 0-1 on rank 0, 29-31 on rank 3
    assert kept.bf16_layer_counts(lo) == [(2, 0), (0, 0), (0, 0), (3, 0)]
    assert plain.bf16_layer_counts(lo) == [(0, 0)] * 4
    bf = Pricer(model, cl, workload(precision="bf16", global_batch=64)).layer_times(lo).layers
    q = plain.layer_times(lo).layers
    extra = bf.dense.forward_s + bf.dense.backward_s - q.dense.forward_s - q.dense.backward_s
    assert extra > 0
    assert kept.bf16_extra_s(lo, (3, 0)) == pytest.approx((3 * extra, 0.0))
    span = plain.spans(lo)
    base = plain.stage_terms(lo, plain.stage_counts(lo), span)
    more = kept.stage_terms(lo, kept.stage_counts(lo), span)
    assert more[3].compute_s - base[3].compute_s == pytest.approx(3 * extra)
    assert more[1].compute_s == base[1].compute_s
    # Megatron's bounds: at most num_layers // pp per end, not under delayed scaling or bf16
    with pytest.raises(InvalidInput, match=r"bf16_layers_end \(9\) must not exceed"):
        Pricer(model, cl, workload(precision="mxfp8", bf16_layers_end=9)).estimate(lo)
    with pytest.raises(ValueError, match="delayed"):
        workload(precision="fp8", fp8_recipe="delayed", bf16_layers_start=1)
    with pytest.raises(ValueError, match="need precision fp8, mxfp8 or nvfp4"):
        workload(bf16_layers_start=1)


def test_megatron_export_writes_the_bf16_layers():
    from planner.export.launch import _megatron_precision

    w = workload(precision="nvfp4", bf16_layers_end=14)
    assert _megatron_precision(w) == [
        "--bf16", "--fp4-format", "e2m1", "--fp4-recipe", "nvfp4",
        "--first-last-layers-bf16",
        "--num-layers-at-start-in-bf16", "0", "--num-layers-at-end-in-bf16", "14",
    ]  # fmt: skip
    assert _megatron_precision(workload(precision="nvfp4"))[-1] == "nvfp4"


def test_saved_gemm_inputs_keep_the_column_wise_copy():
    from cost_models.memory import gemm_input_bytes

    # TE saves the column-wise copy only: fp8 1 B, MXFP8 + E8M0 per 32, NVFP4 0.5 + E4M3 per 16
    assert gemm_input_bytes(workload(precision="fp8")) == 1
    assert gemm_input_bytes(workload(precision="mxfp8")) == 1 + 1 / 32
    assert gemm_input_bytes(workload(precision="nvfp4")) == 0.5 + 1 / 16
    assert gemm_input_bytes(workload()) == 2
    torchao = workload(precision="fp8", selective_recompute="every_other_matmul")
    assert gemm_input_bytes(torchao) == 2  # torchao saves the bf16 input


def test_explain_names_the_nvfp4_rate_and_its_basis():
    from planner.report.text import fp4_text

    gb300, gb200 = models_zoo.load_cluster("gb300-nvl72"), models_zoo.load_cluster("gb200-nvl72")
    nvfp4 = workload(precision="nvfp4")
    assert fp4_text(gb300, nvfp4) == (
        "\nNVFP4 GEMMs: 1.72x the speed of the part's per-tensor fp8 GEMMs (measured on b300, "
        "carried to gb300: gb300 fp4_gemm_speed; presets gpus --constants gb300)"
    )
    b300 = fp4_text(models_zoo.load_cluster("dgx-b300"), nvfp4)
    assert "1.81x" in b300 and "(measured: b300 fp4_gemm_speed" in b300
    assert "1.69x" in fp4_text(gb200, nvfp4)
    bare = gb200.model_copy(update={"gpu": gb200.gpu.model_copy(update={"fp4_gemm_speed": None})})
    assert "2.00x" in fp4_text(bare, nvfp4) and "an assumption" in fp4_text(bare, nvfp4)
    assert fp4_text(gb300, workload(precision="mxfp8")) == ""
