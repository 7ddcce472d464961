"""gpt-oss's clamped activation (ModelSpec.activation_clamp): the clamps are eager passes over the
fc1 output's halves in both launchers (megatron-core 0.19 fused_bias_geglu.
weighted_bias_quick_geglu_impl: chunk, two clamps, torch.cat before the fused quick-GeGLU;
torchtitan models/gpt_oss/moe.py swiglu: two clamps of strided halves), and each clamp saves its
input. Expected values by hand from that code (compute.CLAMP_ELEMS, memory._clamp_tensors)."""

from __future__ import annotations

import pytest
from factories import H100, dense_model, layout, moe_model, workload

from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import CLAMP_ELEMS, layer_time
from cost_models.memory import layer_activation_bytes

CAL = calibration_for("hopper")
HBM = hbm_bytes_per_s(H100, CAL)
T = 4096.0  # tokens per GPU per micro-batch: workload() at seq 4096, micro-batch 1


def _pair(model, lo, is_moe, **work):
    w = workload(**work)
    plain = layer_time(model, H100, CAL, w, lo, is_moe=is_moe)
    clamped_model = model.model_copy(update={"activation_clamp": 7.0})
    clamped = layer_time(clamped_model, H100, CAL, w, lo, is_moe=is_moe)
    return plain, clamped


@pytest.mark.parametrize("fused,fwd,bwd", [(True, 8, 10), (False, 4, 10)])
def test_routed_and_shared_experts_clamps_by_hand(fused, fwd, bwd):
    """moe_model: top-2 of 16 experts of width 1,024 and one shared expert of 1,024, TP 2 ETP 1:
    routed rows 2 / 2 = 1 per token of width 1,024, shared 1,024 / 2 = 512 per token. Fused
    (Megatron): the clamps read and write both halves (4) and the cat both again (4); eager: the
    clamps only. Backward 10 either way (the clamps' masks 6, the halves' gradients joined 4)."""
    lo = layout(tp=2, ep=2, sequence_parallel=True)
    assert CLAMP_ELEMS[fused] == (fwd, bwd)
    plain, clamped = _pair(moe_model(), lo, True, fused_elementwise=fused)
    width = 2 / 2 * 1024 + 1024 / 2
    assert clamped.elementwise_s - plain.elementwise_s == pytest.approx(
        fwd * width * T * 2 / HBM, rel=1e-9
    )
    assert clamped.backward_s - plain.backward_s == pytest.approx(
        bwd * width * T * 2 / HBM, rel=1e-9
    )
    assert clamped.gemm_s == plain.gemm_s and clamped.attention_s == plain.attention_s
    # moe_act recompute reruns the routed experts' clamps with their activation
    routed_s = fwd * 1024 * T * 2 / HBM
    act = dict(clamped.module_s)["moe_act"] - dict(plain.module_s)["moe_act"]
    assert act == pytest.approx(routed_s, rel=1e-9)


def test_a_dense_gated_mlp_clamps_inside_the_mlp_module():
    lo = layout(tp=4, sequence_parallel=True)
    plain, clamped = _pair(dense_model(), lo, False)
    width = 14336 / 4
    assert clamped.elementwise_s - plain.elementwise_s == pytest.approx(
        8 * width * T * 2 / HBM, rel=1e-9
    )
    mlp = dict(clamped.module_s)["mlp"] - dict(plain.module_s)["mlp"]
    assert mlp == pytest.approx(8 * width * T * 2 / HBM, rel=1e-9)


def test_the_clamps_keep_the_fc1_output_alive_unless_the_activation_is_recomputed():
    """Each clamp saves its input, a view of the fc1 output [rows, 2 x width], beside the
    clamped copy the activation saves: +2 x width bf16 elements per row and token. A
    checkpointed activation (moe_act) keeps only its input."""
    model = moe_model()
    clamped = model.model_copy(update={"activation_clamp": 7.0})
    w = workload()
    for modules, extra in (((), True), (("moe_act",), False)):
        lo = layout(tp=1, ep=2, recompute="selective" if modules else "none",
                    recompute_modules=modules or None)  # fmt: skip
        rc = lo.recompute
        base = layer_activation_bytes(model, w, lo, is_moe=True, recompute=rc)
        more = layer_activation_bytes(clamped, w, lo, is_moe=True, recompute=rc)
        routed, shared = 2 * 1024, 1024  # per token: top-2 rows of 1,024; one shared expert
        expected = 2 * (routed + shared) * 2 * T if extra else 2 * shared * 2 * T
        assert more - base == pytest.approx(expected, rel=1e-9)
