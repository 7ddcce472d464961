"""EP all-to-all overlap pairs passes (issue 32 item 4): a forward chunk's dispatch + combine hide
only behind the other micro-batch's backward, the backward's only behind its forward
(DeepSeek-V3 sec. 3.2.1 DualPipe; Megatron combined_1f1b). Hand-counted."""

from cost_models.compute import LayerTime
from cost_models.stage import paired_hidden_ep_s


def _layer(gemm_s: float) -> LayerTime:
    # forward = gemm_s, backward = 2 x gemm_s (no table: dgrad + wgrad)
    return LayerTime(gemm_s=gemm_s, attention_s=0.0, elementwise_s=0.0, overhead_s=0.0, model_flops=0.0)


def test_backward_exchange_hides_only_behind_the_forward() -> None:
    lt = _layer(1.0)
    assert (lt.forward_s, lt.backward_s) == (1.0, 2.0)
    # 1.5 s per pass: forward 1.5 behind backward 2.0 -> 1.5; backward 1.5 behind forward 1.0 -> 1.0.
    # The old whole-window rule hid min(3.0, 3.0) = 3.0.
    assert paired_hidden_ep_s(1.5, 1, lt, 0.0) == 2.5


def test_recompute_lengthens_the_backward_window_and_adds_a_backward_pass() -> None:
    lt = _layer(1.0)
    # recomputed MoE forward: 2 passes inside the backward chunk (2 x 0.8 = 1.6 behind 1.0 -> 1.0),
    # forward pass 0.8 behind backward 2.0 + recompute 0.5 -> 0.8.
    assert abs(paired_hidden_ep_s(0.8, 2, lt, 0.5) - 1.8) < 1e-12


def test_exchange_shorter_than_both_windows_hides_whole() -> None:
    lt = _layer(1.0)
    assert paired_hidden_ep_s(0.4, 1, lt, 0.0) == 0.8
