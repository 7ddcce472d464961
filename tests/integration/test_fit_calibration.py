"""bench/fit_calibration.py: the robust objective, the folds of its guard, and that the guard prices
each fold with constants fitted without it. The fits run on stand-in records whose error is a
hand-written function of one constant (the real pricing is not called), so every expected value is
worked out here."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import fit_calibration as fc  # noqa: E402

KO = ("*", "kernel_overhead_s")


def test_huber_is_quadratic_inside_delta_and_linear_beyond() -> None:
    d = math.log(1.10)
    assert fc.huber(0.05) == pytest.approx(0.5 * 0.05**2)
    assert fc.huber(-0.05) == pytest.approx(0.5 * 0.05**2)
    assert fc.huber(0.5) == pytest.approx(d * (0.5 - 0.5 * d))
    # beyond delta a record 3x further off costs about 3x, not 9x
    assert fc.huber(0.9) - fc.huber(0.3) == pytest.approx(d * 0.6)


def test_legacy_objective_is_median_plus_half_p90() -> None:
    errs = [math.log1p(p / 100) for p in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 40)]
    # median 6; P90 by linear interpolation at position 9 of 0..10: 10
    assert fc.objective(errs, "legacy") == pytest.approx(6 + 0.5 * 10)


def _case(cid: str, want_s: float) -> fc.Case:
    return fc.Case(cid, cid.split("-")[0], "h100-sxm-80gb", False, 1.0, (want_s,))


def _stand_in_error(case: fc.Case) -> float:
    """A record that is right when kernel_overhead_s equals its own want_s."""
    return math.log(fc._get(*KO) / case.inputs[0])


@pytest.fixture()
def stand_in(monkeypatch):
    monkeypatch.setattr(fc, "log_error", _stand_in_error)
    snapshot = dict(fc.cal.CALIBRATION)
    yield
    fc.restore(snapshot)


def test_folds_group_by_source_family_or_id_order() -> None:
    cases = [_case(i, 1.0) for i in ("b-2", "a-1", "b-1", "a-2", "c-1")]
    loso = fc.folds(cases, "loso", 0)
    assert {k: [c.id for c in v] for k, v in loso.items()} == {
        "a": ["a-1", "a-2"], "b": ["b-2", "b-1"], "c": ["c-1"]
    }  # fmt: skip
    kfold = fc.folds(cases, "kfold", 2)
    assert {k: [c.id for c in v] for k, v in kfold.items()} == {
        "k0": ["a-1", "b-1", "c-1"], "k1": ["a-2", "b-2"]
    }  # fmt: skip


def test_fit_walks_to_the_optimum_within_the_bounds(stand_in) -> None:
    cases = [_case(f"a-{i}", 40e-6) for i in range(3)]
    fc._put(*KO, 5e-6)
    touches = {KO: {c.id for c in cases}}
    fitted = fc.fit(cases, [KO], touches, 3, "huber")
    # 5 -> 40 us is 8x: more than one pass of the wide steps (1.6x at most) reaches
    assert fitted[KO] == pytest.approx(40e-6, rel=0.03)
    fc._put(*KO, 5e-6)
    far = [_case(f"a-{i}", 900e-6) for i in range(3)]
    assert fc.fit(far, [KO], {KO: {c.id for c in far}}, 3, "huber")[KO] <= 200e-6


def test_guard_prices_each_fold_with_constants_fitted_without_it(stand_in) -> None:
    # family a wants 10 us, family b 40 us: out of fold, a is priced at b's optimum and back
    cases = [_case("a-1", 10e-6), _case("a-2", 10e-6), _case("b-1", 40e-6), _case("b-2", 40e-6)]
    snapshot = dict(fc.cal.CALIBRATION)
    touches = {KO: {c.id for c in cases}}
    oof = fc.guard(cases, [KO], touches, 3, "huber", snapshot, fc.folds(cases, "loso", 0))
    assert math.expm1(oof["a-1"]) == pytest.approx(3.0, rel=0.1)  # 40 / 10 - 1
    assert math.expm1(oof["b-2"]) == pytest.approx(-0.75, rel=0.1)  # 10 / 40 - 1
    assert fc.cal.CALIBRATION == snapshot  # the shipped constants are restored


def test_select_names_generations_fields_and_groups() -> None:
    assert fc.select(["overhead"]) == [KO]
    assert ("ampere", "gemm_efficiency_fp8") not in fc.select([])  # tied to bf16
    hopper = fc.select(["hopper"])
    assert hopper and all(g == "hopper" for g, _ in hopper)
    assert fc.select(["moe"]) == [("*", f) for f in fc.GROUPS["moe"]]


def test_hopper_fp8_tie_moves_fp8_with_bf16_at_the_measured_mamf_ratio(monkeypatch) -> None:
    """--tie-hopper-fp8: the fp8 ceiling follows the bf16 one at mamf_fp8 / mamf_bf16 (H100 SXM
    1,402.6 / 1,978.9 over 794.5 / 989.4); without it Hopper's two ceilings move apart."""
    table = dict(fc.cal.CALIBRATION)
    monkeypatch.setattr(fc.cal, "CALIBRATION", table)
    monkeypatch.setattr(fc, "TIES", dict(fc.TIES))
    tie = fc.hopper_mamf_tie()
    assert tie == pytest.approx((1402.6 / 1978.9) / (794.5 / 989.4))
    fp8 = table["hopper"].gemm_efficiency_fp8
    fc._put("hopper", "gemm_efficiency_bf16", 0.70)
    assert table["hopper"].gemm_efficiency_fp8 == fp8  # untied: fp8 stays where it was
    fc.TIES[("hopper", "gemm_efficiency_bf16")] = tie
    fc._put("hopper", "gemm_efficiency_bf16", 0.70)
    assert table["hopper"].gemm_efficiency_bf16 == 0.70
    assert table["hopper"].gemm_efficiency_fp8 == pytest.approx(0.70 * tie)
    fc._put("ampere", "gemm_efficiency_bf16", 0.75)  # Ampere's tie: no fp8 units
    assert table["ampere"].gemm_efficiency_fp8 == 0.75
