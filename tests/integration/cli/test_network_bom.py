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
    rail = vary_cluster(fat, "fabric", "rail-only")
    assert rail.tiers == (fat.tiers[0], fat.tiers[1].model_copy(update={"domain_size": None}))
    model = models_zoo.load_model("qwen3-235b-a22b")
    work = Workload(seq_len=4096, global_batch_seqs=1024)
    lo = Layout(tp=2, pp=16, dp=32, ep=8, sequence_parallel=True, recompute="selective")
    a, b = estimate(model, fat, work, lo), estimate(model, rail, work, lo)
    assert abs(a.tokens_per_s_per_gpu - b.tokens_per_s_per_gpu) / a.tokens_per_s_per_gpu < 0.01
    cost = [sum(x.capex_usd_per_gpu for x in network_bill(c)) for c in (fat, rail)]
    assert cost[1] == pytest.approx(562.5 + 1280) and cost[1] < 0.5 * cost[0]


def test_power_and_energy_of_a_two_layer_fat_tree_by_hand() -> None:
    """DGX H100 SuperPOD, 400 Gb/s: per GPU 3 switch ports x 747/64 W (QM9700, 64 ports, 747 W
    typical) + 2 links x 2 transceiver ends x 8.5 W (17 W twin-port 2x400G OSFP) = 35.02 + 34
    = 69.02 W; NICs 0 W (in the server). Energy: 69.02 W x PUE 1.56 / 1000 x $0.08/kWh."""
    from planner.network_bom import network_energy_usd_per_gpu_hour, network_power_w_per_gpu

    c = models_zoo.load_cluster("dgx-h100-superpod")
    bill = network_bill(c)
    assert [b.power_w_per_gpu for b in bill] == pytest.approx(
        [747 / 64 + 2 * 8.5, 2 * 747 / 64 + 2 * 8.5]
    )
    watts = 3 * 747 / 64 + 2 * 2 * 8.5
    assert network_power_w_per_gpu(c) == pytest.approx(watts) == pytest.approx(69.02, abs=0.01)
    assert network_energy_usd_per_gpu_hour(c) == pytest.approx(watts * 1.56 / 1000 * 0.08)
    # 800G ports draw twice (linear in port bandwidth, as the prices).
    fast = vary_cluster(c, "nic-gbps", 800)
    assert network_power_w_per_gpu(fast) == pytest.approx(2 * watts)


def test_power_keys_override_and_pue_below_one_is_refused(tmp_path) -> None:
    from planner.network_bom import network_energy_usd_per_gpu_hour

    f = tmp_path / "prices.yaml"
    f.write_text("nic_port_w_per_400g: 25\nelectricity_usd_per_kwh: 0.1\npue: 1.2\n")
    prices = load_prices(str(f))
    c = models_zoo.load_cluster("dgx-h100-superpod")
    watts = 25 + 3 * 747 / 64 + 4 * 8.5
    assert network_energy_usd_per_gpu_hour(c, prices) == pytest.approx(watts * 1.2 / 1000 * 0.1)
    bad = tmp_path / "bad.yaml"
    bad.write_text("pue: 0.9\n")
    with pytest.raises(InvalidInput, match="pue must be >= 1"):
        load_prices(str(bad))


def test_whatif_cost_adds_amortised_capex_and_energy(capsys) -> None:
    """$/M tokens = (GPU-hour price + capex / (Y x 8,760 h) + energy per hour) / tokens per
    GPU-hour x 1e6, and the JSON carries each part."""
    import json

    from planner import cli

    argv = ["whatif", "--model", "llama3-8b", "--cluster", "dgx-h100-superpod", "--gpus", "64"]
    argv += ["--global-batch", "64", "--tp", "8", "--pp", "1", "--vary", "nic-gbps"]
    argv += ["--values", "800", "--gpu-hour-price", "2", "--amortization-years", "4", "--json"]
    argv += ["--token-budget", "1e9"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for p in (out["baseline"], *out["points"]):
        capex_h = p["network_capex_usd_per_gpu"] / (4 * 8760)
        assert p["network_capex_usd_per_gpu_hour"] == pytest.approx(capex_h)
        energy_h = p["network_power_w_per_gpu"] * 1.56 / 1000 * 0.08
        assert p["network_energy_usd_per_gpu_hour"] == pytest.approx(energy_h)
        per_m = (2 + capex_h + energy_h) / (p["tokens_per_s_per_gpu"] * 3600) * 1e6
        assert p["cost_per_m_tokens"] == pytest.approx(per_m)
        assert p["train_network_energy_usd"] == pytest.approx(
            p["train_days"] * 24 * 64 * energy_h
        )
    assert out["points"][0]["network_power_w_per_gpu"] == pytest.approx(
        2 * out["baseline"]["network_power_w_per_gpu"]
    )


def test_rail_only_versus_fat_tree_is_one_command(capsys) -> None:
    """`whatif --vary fabric --values rail-only`: the baseline row is the preset's fat-tree
    (rail leaves + spine), the other drops the spine (arXiv 2307.12169); both rows carry the
    throughput, the $/M tokens and the bill of materials."""
    import json

    from planner import cli

    argv = ["whatif", "--model", "llama3-8b", "--cluster", "dgx-h100-superpod", "--gpus", "512"]
    argv += ["--global-batch", "256", "--tp", "8", "--pp", "1", "--vary", "fabric"]
    argv += ["--values", "rail-only", "--gpu-hour-price", "2", "--amortization-years", "4"]
    assert cli.main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fat, rail = out["baseline"], out["points"][0]
    assert rail["value"] == "rail-only"
    assert fat["network_capex_usd_per_gpu"] == pytest.approx(3 * 562.5 + 2 * 1280)
    assert rail["network_capex_usd_per_gpu"] == pytest.approx(562.5 + 1280)
    assert rail["network_power_w_per_gpu"] == pytest.approx(747 / 64 + 2 * 8.5)
    assert abs(rail["change_vs_baseline"]) < 0.02
    assert rail["cost_per_m_tokens"] < fat["cost_per_m_tokens"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "rail-only" in text and "bill of materials" in text
