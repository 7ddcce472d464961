"""FlashAttention-1-era attention (Workload.attention_kernel 'flash1'): priced at flash-attn
1.x's measured forward + backward TFLOP/s (FA2 paper figures, cost_models.compute
FLASH_FWD_BWD_TFLOPS) over the measured part's peak, worked out by hand here."""

import math

import pytest
from factories import H100, cluster, dense_model, layout, workload

import models_zoo
from cost_models.calibration import calibration_for
from cost_models.compute import flash1_efficiency, layer_time
from cost_models.errors import InvalidInput
from planner import api


def test_measured_points_are_the_figures_bar_labels_over_the_parts_peak():
    assert flash1_efficiency("ampere", 2048, 128) == pytest.approx(69 / 312, rel=1e-12)
    assert flash1_efficiency("ampere", 16384, 64) == pytest.approx(97 / 312, rel=1e-12)
    assert flash1_efficiency("hopper", 512, 64) == pytest.approx(104 / 989.4, rel=1e-12)
    assert flash1_efficiency("hopper", 8192, 128) == pytest.approx(135 / 989.4, rel=1e-12)


def test_between_points_log_sequence_and_linear_head_dim():
    mid_seq = round(math.sqrt(2048 * 4096))  # halfway in log2 between 2K and 4K
    expect = (69 + (76 - 69) * (math.log2(mid_seq) - 11)) / 312
    assert flash1_efficiency("ampere", mid_seq, 128) == pytest.approx(expect, rel=1e-12)
    # head dim 96: halfway between the d64 (136) and d128 (108) bars at 2K on H100
    assert flash1_efficiency("hopper", 2048, 96) == pytest.approx(122 / 989.4, rel=1e-12)


def test_outside_the_measured_range_the_nearest_point_holds():
    assert flash1_efficiency("ampere", 256, 128) == flash1_efficiency("ampere", 512, 128)
    assert flash1_efficiency("hopper", 65536, 128) == pytest.approx(137 / 989.4, rel=1e-12)
    assert flash1_efficiency("hopper", 4096, 256) == flash1_efficiency("hopper", 4096, 128)
    assert flash1_efficiency("ampere", 4096, 32) == flash1_efficiency("ampere", 4096, 64)


def test_layer_attention_time_by_hand():
    m = dense_model()  # 32 heads of 128
    w = workload(seq_len=8192, global_batch=8, attention_kernel="flash1")
    lt = layer_time(m, cluster().gpu, calibration_for("hopper"), w, layout(dp=8), is_moe=False)
    flops = 8192 * 8192 * 32 * 256  # causal half of 2 * s^2 * heads * d, QK^T and PV
    assert lt.attention_s == pytest.approx(flops / (989.4e12 * 135 / 989.4), rel=1e-12)
    # another Hopper part runs at the same fraction of its own peak
    h800 = H100.model_copy(update={"id": "test-h800", "peak_bf16_tflops": 900.0})
    lt2 = layer_time(m, h800, calibration_for("hopper"), w, layout(dp=8), is_moe=False)
    assert lt2.attention_s == pytest.approx(flops / (900e12 * 135 / 989.4), rel=1e-12)


def test_flash1_is_slower_than_fa2_at_every_measured_point():
    from cost_models.compute import FLASH_FWD_BWD_TFLOPS as T

    for gen in ("ampere", "hopper"):
        for dim in (64, 128):
            assert all(a < b for a, b in zip(T[(gen, "flash1", dim)], T[(gen, "fa2", dim)]))


def test_refused_on_generations_flash_attn_1_does_not_build_for():
    with pytest.raises(InvalidInput, match="attention_kernel: flash1 .* ampere and hopper"):
        flash1_efficiency("blackwell", 4096, 128)
    m = models_zoo.load_model("llama3-8b")
    c = models_zoo.load_cluster("dgx-b200", 8)
    w = api.make_workload(m, seq_len=4096, global_batch=64).model_copy(
        update={"attention_kernel": "flash1"}
    )
    with pytest.raises(InvalidInput, match=r"attention_kernel: flash1 .*B200.* is blackwell"):
        api.estimate(m, c, api.layout_with_defaults({"tp": 1, "pp": 1, "dp": 8}), w)
    a100 = models_zoo.load_cluster("dgx-a100", 8)
    est = api.estimate(m, a100, api.layout_with_defaults({"tp": 1, "pp": 1, "dp": 8}), w)
    fa2 = api.estimate(
        m,
        a100,
        api.layout_with_defaults({"tp": 1, "pp": 1, "dp": 8}),
        w.model_copy(update={"attention_kernel": "fa2"}),
    )
    assert est.step_time_s > fa2.step_time_s


def test_a_window_is_a_mask_over_the_full_kernel_under_flash1():
    """flash-attn 1.x has no local window (flash-attn 2.3 added it): a sliding-window layer takes
    the full causal kernel's time, while the model FLOPs stay the window's."""
    from cost_models.compute import attention_core_flops, layer_attention

    full, windowed = dense_model(), dense_model(sliding_window=1024, full_attention_every=2)
    cal, gpu, lay = calibration_for("hopper"), cluster().gpu, layout(dp=8)
    w = workload(seq_len=8192, global_batch=8, attention_kernel="flash1")
    fwd, bwd, _, flops = layer_attention(windowed, gpu, cal, w, lay, None, is_moe=False)
    ref_fwd, ref_bwd, _, ref_flops = layer_attention(full, gpu, cal, w, lay, None, is_moe=False)
    assert (fwd, bwd) == (ref_fwd, ref_bwd)
    half = attention_core_flops(windowed, w, lay, 1024)  # every other layer windowed
    assert flops == pytest.approx(0.5 * ref_flops + 0.5 * half, rel=1e-12) and flops < ref_flops
    fa2 = w.model_copy(update={"attention_kernel": "fa2"})
    assert layer_attention(windowed, gpu, cal, fa2, lay, None, is_moe=False)[0] < (
        layer_attention(full, gpu, cal, fa2, lay, None, is_moe=False)[0]
    )
