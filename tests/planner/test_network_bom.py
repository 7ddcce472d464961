"""Network bill of materials (issue 16): counts per GPU and prices, by hand."""

import pytest

import models_zoo
from cost_models.errors import InvalidInput
from planner.network_bom import DEFAULT_PRICES, load_prices, network_bill
from planner.whatif import vary_cluster


def test_two_layer_fat_tree_counts_and_prices() -> None:
    # DGX H100 SuperPOD preset: rail leaves + non-blocking spine, 400 Gb/s per GPU.
    bill = network_bill(models_zoo.load_cluster("dgx-h100-superpod"))
    assert [(b.tier, b.switch_ports_per_gpu, b.links_per_gpu) for b in bill] == [
        ("rail-leaf", 1.0, 1.0),
        ("spine", 2.0, 1.0),
    ]
    # 3 ports x $562.5 + 2 links x $1,280 per GPU (NICs inside the server price).
    assert sum(b.capex_usd_per_gpu for b in bill) == pytest.approx(3 * 562.5 + 2 * 1280)


def test_taper_and_faster_nics_scale_the_bill() -> None:
    bill = network_bill(models_zoo.load_cluster("llama3-roce-24k"))
    agg = next(b for b in bill if b.tier == "aggregation")
    assert agg.links_per_gpu == pytest.approx(1 / 7) and agg.switch_ports_per_gpu == pytest.approx(
        2 / 7
    )
    fast = vary_cluster(models_zoo.load_cluster("dgx-h100-superpod"), "nic-gbps", 800)
    assert sum(b.capex_usd_per_gpu for b in network_bill(fast)) == pytest.approx(
        2 * (3 * 562.5 + 2 * 1280)
    )


def test_prices_override_file(tmp_path) -> None:
    f = tmp_path / "prices.yaml"
    f.write_text("nic_port_usd_per_400g: 1500\n")
    prices = load_prices(str(f))
    assert prices["nic_port_usd_per_400g"] == 1500
    assert prices["link_usd_per_400g"] == DEFAULT_PRICES["link_usd_per_400g"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("optics: 3\n")
    with pytest.raises(InvalidInput, match="unknown price"):
        load_prices(str(bad))


def test_rail_only_matches_fat_tree_speed_at_less_cost() -> None:
    """Rail-only (Wang et al., arXiv 2307.12169): drop the spine, keep one rail switch per GPU
    rank; rings stay on a rail and all-to-all hops over NVLink first, so LLM training keeps its
    speed while the scale-out network costs less than half."""
    from cost_models import estimate
    from cost_models.specs import Layout, Workload

    fat = models_zoo.load_cluster("dgx-h100-superpod")
    rail = fat.model_copy(
        update={"tiers": (fat.tiers[0], fat.tiers[1].model_copy(update={"domain_size": None}))}
    )
    model = models_zoo.load_model("qwen3-235b-a22b")
    work = Workload(seq_len=4096, global_batch_seqs=1024)
    lo = Layout(tp=2, pp=16, dp=32, ep=8, sequence_parallel=True, recompute="selective")
    a, b = estimate(model, fat, work, lo), estimate(model, rail, work, lo)
    assert abs(a.tokens_per_s_per_gpu - b.tokens_per_s_per_gpu) / a.tokens_per_s_per_gpu < 0.01
    cost = [sum(x.capex_usd_per_gpu for x in network_bill(c)) for c in (fat, rail)]
    assert cost[1] == pytest.approx(562.5 + 1280) and cost[1] < 0.5 * cost[0]
