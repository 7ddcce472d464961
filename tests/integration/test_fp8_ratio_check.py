"""bench/fp8_ratio_check.py: the measured fp8 / bf16 GEMM ratio it reads from the shipped tables,
the curve's, and how it pairs held-out bf16 / fp8 twins (docs/accuracy.md "The fp8 / bf16 speed
ratio on Hopper")."""

from __future__ import annotations

import copy
import statistics
from pathlib import Path

import pytest
from factories import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = load_script(ROOT / "bench" / "fp8_ratio_check.py")


def test_shipped_h100_table_ratio_and_the_curves() -> None:
    import models_zoo

    ratios = SCRIPT.table_ratios("h100-sxm-80gb")
    assert len(ratios) >= 300  # the 304 shapes both dtypes hold
    assert 1.6 < statistics.median(ratios) < 1.9  # docs: 1.756
    assert SCRIPT.table_ratios("b200") == []  # no shipped table
    gpu = models_zoo.load_gpu("h100-sxm-80gb")
    assert SCRIPT.curve_ratio("hopper", gpu) == pytest.approx(
        0.65 * 1978.9 / (0.68 * 989.4), rel=1e-3
    )
    assert SCRIPT.mamf_ratio("hopper") == pytest.approx(1402.6 / 794.5, rel=1e-6)


def _run(rid: str, precision: str, **settings) -> dict:
    return {
        "id": rid,
        "source": "DGX Cloud Benchmarking, NeMo 25.02 container",
        "gpu": "h100-sxm-80gb",
        "num_gpus": 64,
        "model": {"name": "x", "num_layers": 2, "hidden_size": 64},
        "layout": {"tp": 2, "pp": 1, "dp": 32, "precision": precision},
        "settings": settings,
    }


def test_twins_pair_one_bf16_and_one_fp8_row_of_one_job() -> None:
    bf16 = _run("a-bf16", "bf16", main_grads="bf16")
    fp8 = _run("a-fp8", "fp8", main_grads="bf16", fp8_recipe="delayed", fp8_params=True)
    other = copy.deepcopy(fp8)
    other["id"], other["layout"]["tp"] = "b-fp8", 4  # another layout: not a twin
    assert SCRIPT.twins([bf16, fp8, other]) == [(bf16, fp8)]
    later = copy.deepcopy(fp8)
    later["id"], later["source"] = "c-fp8", "DGX Cloud Benchmarking, NeMo 25.04 container"
    assert SCRIPT.twins([bf16, later]) == []  # another container
    twice = copy.deepcopy(fp8)
    twice["id"] = "d-fp8"
    assert SCRIPT.twins([bf16, fp8, twice]) == []  # ambiguous: two fp8 rows of the job
