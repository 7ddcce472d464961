"""Every preset validates; model parameter counts match their published totals."""

import pytest

from cost_models.params import total_params
from models_zoo import list_presets, load_cluster, load_gpu, load_model


def stated_tolerance(published: float) -> float:
    """2 %, or half a unit of the figure's last stated digit ('1.7' claims only +-0.05)."""
    text = repr(float(published)).rstrip("0").rstrip(".")
    decimals = len(text.split(".")[1]) if "." in text else 0
    return max(0.02, 0.5 * 10**-decimals / published)


@pytest.mark.parametrize("name", list_presets("models"))
def test_model_parameter_count_matches_published(name):
    model = load_model(name)
    assert model.source
    if model.published_params_b is None:
        assert "no published total" in model.source  # benchmark-only configs say so
        return
    count_b = total_params(model) / 1e9
    assert count_b == pytest.approx(
        model.published_params_b, rel=stated_tolerance(model.published_params_b)
    )


def test_stated_tolerance():
    assert stated_tolerance(1.7) == pytest.approx(0.05 / 1.7)
    assert stated_tolerance(405) == 0.02


@pytest.mark.parametrize("name", list_presets("gpus"))
def test_gpu_presets(name):
    gpu = load_gpu(name)
    assert gpu.source and gpu.hbm_gib > 0
    if gpu.peak_fp8_tflops is not None:
        assert gpu.peak_fp8_tflops == pytest.approx(
            2 * gpu.peak_bf16_tflops, rel=1e-3
        )  # rounded sheets


@pytest.mark.parametrize("name", list_presets("clusters"))
def test_cluster_presets(name):
    cluster = load_cluster(name)
    assert cluster.source
    bandwidths = [t.bandwidth_gb_per_s for t in cluster.tiers]
    assert bandwidths == sorted(bandwidths, reverse=True)
    assert load_cluster(name, num_gpus=2 * cluster.tiers[0].domain_size).num_gpus == (
        2 * cluster.tiers[0].domain_size
    )


def test_aliases_resolve():
    assert load_model("llama-3-70b") == load_model("llama3-70b")
    assert load_gpu("h100").id == "h100-sxm-80gb"
