"""Network bill of materials (issues 16, 33): Clos layers from the switch radix, per-component
prices and power, counted by hand."""

import json
import re

import pytest

import models_zoo
from cost_models.errors import InvalidInput
from planner.network_bom import bill, clos
from planner.network_prices import CATALOGUE, load_prices
from planner.whatif import vary_cluster

LINK_400G = 2 * CATALOGUE["osfp-400g"].usd + CATALOGUE["fibre"].usd  # $1,280
QM9700 = CATALOGUE["qm9700"].usd


def _scale_out(b):
    return [t for t in b.tiers if t.kind != "scale_up"]


def _no_nic_prices(tmp_path):
    """DeepSeek's Table 3 prices the fabric (switches and links), not the endpoints' NICs."""
    f = tmp_path / "fabric-only.yaml"
    f.write_text("connectx-7: {usd: 0}\n")
    return load_prices(str(f))


def test_folded_clos_layers_by_hand() -> None:
    # 64 ports: 1 layer to 64 endpoints, 2 to 64 x 32 = 2,048, 3 to 64 x 32 x 32 = 65,536.
    assert clos(64, 64, 1, []) == [(1, 64)]
    assert clos(2048, 64, 2, [1.0]) == [(64, 2048), (32, 2048)]
    assert clos(65536, 64, 3, [1.0, 1.0]) == [(2048, 65536), (2048, 65536), (1024, 65536)]
    # 3:1 taper above the leaves: 48 ports down, 16 up.
    assert clos(960, 64, 2, [3.0]) == [(20, 960), (5, 320)]


def test_deepseek_table_3_switch_counts_and_cost_ratio(tmp_path) -> None:
    """arXiv 2505.09343 Table 3, 64-port 400G: FT2 2,048 endpoints 96 switches; MPFT 16,384
    endpoints 768 switches ($4.39k per endpoint); FT3 65,536 endpoints 5,120 switches ($7.5k):
    FT3 / MPFT cost per endpoint 1.71."""
    prices = _no_nic_prices(tmp_path)
    cases = {
        "FT2": ("dgx-h100", 2048, 96),
        "MPFT": ("deepseek-v3-mpft", 16384, 768),
        "FT3": ("dgx-h100", 65536, 5120),
    }
    per_endpoint = {}
    for key, (preset, n, switches) in cases.items():
        tiers = _scale_out(bill(models_zoo.load_cluster(preset, n), prices))
        assert sum(t.switches for t in tiers) == switches, key
        per_endpoint[key] = sum(t.capex_usd for t in tiers) / n
    # By hand: 2 layers = 3 switch ports + 2 links per endpoint, 3 layers = 5 + 3.
    assert per_endpoint["MPFT"] == pytest.approx(3 * QM9700 / 64 + 2 * LINK_400G)
    assert per_endpoint["FT3"] == pytest.approx(5 * QM9700 / 64 + 3 * LINK_400G)
    assert per_endpoint["MPFT"] == pytest.approx(4390, rel=0.05)
    assert per_endpoint["FT3"] / per_endpoint["MPFT"] == pytest.approx(1.71, rel=0.15)


def test_rail_only_saving_changes_with_size_and_radix() -> None:
    """Rail-only (arXiv 2307.12169) drops the spine: one Clos per rail over N / 8 GPUs."""

    def switches(n: int, switch: str) -> tuple[int, int]:
        fat = models_zoo.load_cluster("dgx-h100-superpod", n)
        fat = fat.model_copy(update={"network": fat.network.model_copy(update={"switch": switch})})
        rail = vary_cluster(fat, "fabric", "rail-only")
        return tuple(sum(t.switches for t in _scale_out(bill(c))) for c in (fat, rail))

    # 256 GPUs, 64 ports: fat-tree 8 leaves + 4 spines; rail-only one 32-GPU switch per rail.
    assert switches(256, "qm9700") == (12, 8)
    # 1,024: 32 + 16 against 8 rails x (4 leaves + 2 spines): no saving.
    assert switches(1024, "qm9700") == (48, 48)
    # Quantum-X800 at 400G: 144 x 800G = 288 x 400G; 1,024 GPUs: fat-tree 8 + 4, rail-only
    # 8 rails of 128 GPUs, one switch each.
    assert switches(1024, "q3400") == (12, 8)


def test_nvl72_scale_up_costs_more_per_gpu_than_a_baseboard() -> None:
    nvl = bill(models_zoo.load_cluster("gb200-nvl72", 72)).tiers[0]
    hgx = bill(models_zoo.load_cluster("dgx-h100", 8)).tiers[0]
    assert (nvl.kind, nvl.switches, hgx.kind, hgx.switches) == ("scale_up", 9, "scale_up", 1)
    tray, spine = CATALOGUE["nvlink-switch-tray"], CATALOGUE["nvl72-cable-backplane"]
    assert nvl.capex_usd == pytest.approx(9 * tray.usd + spine.usd)
    assert nvl.capex_usd / 72 > hgx.capex_usd / 8


def test_800g_is_not_twice_400g_and_nics_cost_money() -> None:
    c = models_zoo.load_cluster("dgx-h100-superpod", 1024)
    slow, fast = bill(c), bill(vary_cluster(c, "nic-gbps", 800))
    leaf = _scale_out(slow)[0]
    assert leaf.nics == 1024 and leaf.capex_usd > 1024 * CATALOGUE["connectx-7"].usd > 0
    assert _scale_out(fast)[0].switch_model == "q3400"
    assert fast.capex_usd_per_gpu / slow.capex_usd_per_gpu < 1.9


def test_power_of_a_two_layer_fat_tree_by_hand() -> None:
    """DGX H100 SuperPOD, 1,024 GPUs: 48 QM9700 x 747 W + 2,048 links x 2 ends x 8.5 W + 1,024
    ConnectX-7 x 25 W + 128 HGX baseboards' NVSwitches x 400 W."""
    b = bill(models_zoo.load_cluster("dgx-h100-superpod", 1024))
    watts = 48 * 747 + 4096 * 8.5 + 1024 * 25 + 128 * 400
    assert b.power_w_per_gpu * 1024 == pytest.approx(watts)
    assert b.energy_usd_per_gpu_hour == pytest.approx(watts / 1024 * 1.56 / 1000 * 0.08)
    tiers = _scale_out(b)
    assert [(t.layers, t.switches, t.links, t.transceivers) for t in tiers] == [
        (1, 32, 1024, 2048),
        (1, 16, 1024, 2048),
    ]


def test_taper_shrinks_the_top_tier() -> None:
    # Llama 3's 24K RoCE: pods joined at 1:7; Spectrum-4 at 400G = 128 ports.
    agg = bill(models_zoo.load_cluster("llama3-roce-24k")).tiers[-1]
    assert (agg.switch_model, agg.radix, agg.links) == ("sn5600", 128, 3511)  # 24,576 / 7
    assert agg.switches == 28  # 3,511 / 128


def test_prices_override_file(tmp_path) -> None:
    f = tmp_path / "prices.yaml"
    f.write_text("qm9700: {usd: 40000, w: 800}\npue: 1.2\n")
    prices = load_prices(str(f))
    assert prices.get("qm9700").usd == 40000 and prices.pue == 1.2
    assert prices.get("osfp-400g") == CATALOGUE["osfp-400g"]
    for text, match in [
        ("optics: 3\n", "unknown price"),
        ("pue: 0.9\n", "pue must be >= 1"),
        ("qm9700: 3\n", "mapping with usd"),
        ("qm9700: {usd: -1}\n", "must be a number >= 0"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(InvalidInput, match=match):
            load_prices(str(bad))


def test_bill_cli_json_follows_the_contract(capsys) -> None:
    from planner import cli

    assert cli.main(["bill", "--cluster", "gb200-nvl72-superpod", "--gpus", "576", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"gpus", "tiers", "capex_usd_per_gpu", "power_w_per_gpu"}
    keys = {"name", "kind", "switch_model", "radix", "port_gb_per_s", "layers", "switches"}
    keys |= {"switch_ports", "links", "transceivers", "nics", "capex_usd", "power_w", "sources"}
    assert all(set(t) == keys for t in out["tiers"])
    assert out["tiers"][0]["kind"] == "scale_up" and out["tiers"][0]["switches"] == 72
    total = sum(t["capex_usd"] for t in out["tiers"]) / 576
    assert out["capex_usd_per_gpu"] == pytest.approx(total)
    assert cli.main(["bill", "--cluster", "dgx-h100", "--gpus", "16"]) == 0
    assert "qm9700" in capsys.readouterr().out
    assert cli.main(["bill", "--cluster", "dgx-h100", "--prices", "/nonexistent.yaml"]) == 2


def test_whatif_cost_adds_amortised_capex_and_energy(capsys) -> None:
    """$/M tokens = (GPU-hour price + capex / (Y x 8,760 h) + energy per hour) / tokens per
    GPU-hour x 1e6, and the JSON carries each part."""
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
    assert out["points"][0]["network_power_w_per_gpu"] > out["baseline"]["network_power_w_per_gpu"]


def test_whatif_refuses_to_count_the_network_twice(capsys) -> None:
    from planner import cli

    argv = ["whatif", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    argv += ["--vary", "nic-gbps", "--values", "800", "--gpu-hour-price", "2"]
    argv += ["--network-cost-share", "0.1", "--amortization-years", "4"]
    assert cli.main(argv) == 2
    assert "both price the network" in capsys.readouterr().err


def test_rail_only_versus_fat_tree_is_one_command(capsys) -> None:
    """`whatif --vary fabric --values rail-only`: the baseline row is the preset's fat-tree
    (rail leaves + spine), the other drops the spine (arXiv 2307.12169); both rows carry the
    throughput, the $/M tokens and the bill of materials. 512 GPUs, 64-port switches: the
    fat-tree has 16 leaves + 8 spines and 1,024 links, rail-only 8 rails x 1 switch and 512."""
    from planner import cli

    argv = ["whatif", "--model", "llama3-8b", "--cluster", "dgx-h100-superpod", "--gpus", "512"]
    argv += ["--global-batch", "256", "--tp", "8", "--pp", "1", "--vary", "fabric"]
    argv += ["--values", "rail-only", "--gpu-hour-price", "2", "--amortization-years", "4"]
    assert cli.main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fat, rail = out["baseline"], out["points"][0]
    assert rail["value"] == "rail-only"
    common = 512 * CATALOGUE["connectx-7"].usd + 64 * CATALOGUE["hgx-nvswitch"].usd
    assert fat["network_capex_usd_per_gpu"] * 512 == pytest.approx(
        24 * QM9700 + 1024 * LINK_400G + common
    )
    assert rail["network_capex_usd_per_gpu"] * 512 == pytest.approx(
        8 * QM9700 + 512 * LINK_400G + common
    )
    assert abs(rail["change_vs_baseline"]) < 0.02
    assert rail["cost_per_m_tokens"] < fat["cost_per_m_tokens"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "rail-only" in text and "bill of materials" in text


def _baseline_equals_plan(argv: list[str], capsys) -> tuple[dict, dict]:
    from planner import cli

    assert cli.main(["plan", *argv, "--json"]) == 0
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    # whatif compares the fastest plans (planner/whatif.py): plan's best, unless a plan ranked
    # below it is marked the fastest (the best is then the simpler plan within the tolerance)
    plan = next((p for p in ranked if "fastest" in p), ranked[0])
    assert cli.main(["whatif", *argv, "--vary", "nic-gbps", "--values", "800", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return plan, out


def test_whatif_takes_plans_flags_and_its_baseline_is_plans_fastest(capsys) -> None:
    """One argparse definition for plan and whatif (issue 33): the search and memory flags of
    plan reach whatif's plans, so its baseline is plan's fastest plan."""
    argv = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    argv += ["--global-batch", "32", "--zero", "1", "--recompute", "selective", "--max-tp", "4"]
    argv += ["--optimizer-moments", "bf16", "--framework", "none"]
    plan, out = _baseline_equals_plan(argv, capsys)
    base = out["baseline"]
    assert base["plan"]["layout"] == plan["layout"] and base["plan"]["layout"]["tp"] <= 4
    assert base["tokens_per_s_per_gpu"] == pytest.approx(plan["estimate"]["tokens_per_s_per_gpu"])
    assert out["framework"] is None


@pytest.mark.slow
def test_whatif_runs_deepseek_v3s_own_setup(capsys) -> None:
    """DeepSeek-V3's recipe (DualPipe, DeepEP, bf16 moments, EP overlap, no framework's rules)
    on 2,048 H800: whatif's baseline is plan's fastest plan (1,718.6 tokens/s/GPU measured)."""
    argv = ["--model", "deepseek-v3", "--cluster", "h800", "--gpus", "2048", "--precision", "fp8"]
    argv += ["--global-batch", "15360", "--framework", "none", "--pp-schedules", "1f1b"]
    argv += ["dualpipe", "--ep-overlap", "--moe-dispatcher", "deepep", "--optimizer-moments"]
    argv += ["bf16", "--activation-func-fp8-input-store", "--attention-output-store", "e5m6"]
    plan, out = _baseline_equals_plan(argv, capsys)
    base = out["baseline"]
    assert base["plan"]["layout"]["pp_schedule"] == "dualpipe"
    got, want = base["tokens_per_s_per_gpu"], plan["estimate"]["tokens_per_s_per_gpu"]
    assert got == pytest.approx(want, rel=0.01)


def test_docs_fabric_table_quotes_the_bill(tmp_path) -> None:
    """docs/networks.md's FT2 / MPFT / FT3 table and its cost ratio are what `bill` gives (the
    fabric only, as above): switches and $ per endpoint of each row."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs/networks.md").read_text()
    prices = _no_nic_prices(tmp_path)
    per_endpoint = {}
    rows = re.findall(
        r"\| (\w+) \(`planner bill --cluster ([\w-]+) --gpus (\d+)`\) \| ([\d,]+) \| (\d[\d,]*) / "
        r"[\d,]+ \| ([\d,]+) / [\d,]+ \|",
        text,
    )
    assert [r[0] for r in rows] == ["FT2", "MPFT", "FT3"]
    for key, preset, n, endpoints, switches, usd in rows:
        tiers = _scale_out(bill(models_zoo.load_cluster(preset, int(n)), prices))
        assert int(endpoints.replace(",", "")) == int(n)
        assert sum(t.switches for t in tiers) == int(switches.replace(",", "")), key
        per_endpoint[key] = sum(t.capex_usd for t in tiers) / int(n)
        assert f"{per_endpoint[key]:,.0f}" == usd, key
    ratio = per_endpoint["FT3"] / per_endpoint["MPFT"]
    assert f"FT3 / MPFT cost per endpoint: {ratio:.2f}" in text


def test_docs_800g_sentence_quotes_the_bill() -> None:
    """docs/networks.md "So 800G is not twice 400G": the NICs' share of the 1,024-GPU SuperPOD
    bill and the scale-up fabric per GPU of an NVL72 rack and an HGX baseboard."""
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[3] / "docs/networks.md").read_text().split())
    b = bill(models_zoo.load_cluster("dgx-h100-superpod", 1024))
    nics = sum(t.nics for t in b.tiers) * CATALOGUE["connectx-7"].usd
    total = b.capex_usd_per_gpu * b.gpus
    assert f"NICs cost money (1,024 ConnectX-7 = ${nics / 1e6:.2f}M of the ${total / 1e6:.1f}M)" in text
    scale_up = {
        name: next(t for t in bill(models_zoo.load_cluster(name)).tiers if t.kind == "scale_up")
        for name in ("gb200-nvl72", "dgx-h100")
    }
    per_gpu = {k: t.capex_usd / models_zoo.load_cluster(k).num_gpus for k, t in scale_up.items()}
    assert (
        f"the NVL72 scale-up fabric costs ${per_gpu['gb200-nvl72']:,.0f} per GPU (9 trays + "
        f"backplane per 72) against ${per_gpu['dgx-h100']:,.0f} for an HGX baseboard's NVSwitches"
    ) in text
