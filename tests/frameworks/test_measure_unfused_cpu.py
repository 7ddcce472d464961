"""bench/measure_unfused_attention.py --smoke: the device script's whole loop on the CPU (one tiny
shape, Megatron's kernel replaced by its plain-torch reference), so a loan's minutes are not spent
on a typo; and the reference itself against autograd's softmax. Needs torch (the frameworks'
environment, .ci/run); the default suite skips it. No figure from the CPU is claimed."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (.ci/run's environment has it)")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import measure_unfused_attention as mua

PIECES = {
    "megatron_e2e", "megatron_e2e_dropout", "bmm1_fwd", "softmax_fwd", "bmm2_fwd", "bmm_dp_bwd",
    "bmm_dv_bwd", "softmax_bwd", "bmm_dq_bwd", "bmm_dk_bwd", "dropout_fwd", "dropout_bwd",
    "pytorch_e2e",
}  # fmt: skip


def test_smoke_writes_every_piece(tmp_path):
    assert mua.main(["--smoke", "--out", str(tmp_path)]) == 0
    with (tmp_path / "unfused_pieces.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["piece"] for r in rows} == PIECES | {"copy"}
    assert all(float(r["seconds"]) > 0 for r in rows)


def test_the_reference_is_a_causal_softmax_and_its_backward():
    """Forward: softmax over each row's keys up to the diagonal (zeros past it); backward: the
    gradient autograd gives through the same masked softmax."""
    ref = mua.ReferenceSoftmax(torch)
    x = torch.randn(2, 8, 8, dtype=torch.float64, requires_grad=True)
    y = ref.forward(x, 0.5)
    assert torch.equal(torch.triu(y, 1), torch.zeros_like(y))
    assert torch.allclose(y.sum(-1), torch.ones(2, 8, dtype=torch.float64))
    g = torch.randn(2, 8, 8, dtype=torch.float64)
    mask = torch.ones(8, 8, dtype=torch.bool).triu(1)
    expected = torch.autograd.grad(
        torch.softmax((x * 0.5).masked_fill(mask, float("-inf")), -1), x, g
    )[0]
    assert torch.allclose(ref.backward(g, y.detach(), 0.5), expected)
