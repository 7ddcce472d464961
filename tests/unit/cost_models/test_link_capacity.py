"""Links as capacities (issue 16): every flow crossing a tier adds to its busy time, and no tier
is busy longer than the step."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import models_zoo
from cost_models import estimate
from cost_models.rules import layout_violations
from cost_models.specs import Layout, Workload

PRESETS = sorted(p.stem for p in (Path(models_zoo.__file__).parent / "clusters").glob("*.json"))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _random_layouts(model, cluster, work, rng: random.Random, count: int) -> list[Layout]:
    out: list[Layout] = []
    n = cluster.num_gpus
    for _ in range(count * 40):
        tp = rng.choice([d for d in _divisors(cluster.gpus_per_node) if d <= 8])
        pp = rng.choice([d for d in (1, 2, 4, 8, 16) if (n // tp) % d == 0])
        rest = n // (tp * pp)
        cp = rng.choice([d for d in (1, 2) if rest % d == 0])
        dp = rest // cp
        ep = 1
        if model.moe is not None:
            ep = rng.choice([e for e in _divisors(dp * cp * tp) if model.moe.num_experts % e == 0])
        lo = Layout(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            recompute=rng.choice(["none", "selective", "full"]),
            zero_stage=rng.choice([0, 1, 3]),
            sequence_parallel=tp > 1,
            order=tuple(rng.sample(list(Layout.model_fields["order"].default), 4)),
            pp_schedule="dualpipe" if pp > 1 and rng.random() < 0.3 else "1f1b",
        )
        if not layout_violations(model, cluster, work, lo):
            out.append(lo)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize("preset", PRESETS)
def test_no_tier_busy_longer_than_the_step(preset: str) -> None:
    cluster = models_zoo.load_cluster(preset)
    rng = random.Random(preset)
    for model_name in ("llama3.1-8b", "qwen3-30b-a3b"):
        model = models_zoo.load_model(model_name)
        dispatcher = rng.choice(["alltoall", "deepep"])
        m = rng.choice([2, 8, 32])
        work = Workload(
            seq_len=4096, global_batch_seqs=cluster.num_gpus * m, moe_dispatcher=dispatcher
        )
        layouts = _random_layouts(model, cluster, work, rng, 6)
        assert layouts, (preset, model_name)
        for lo in layouts:
            e = estimate(model, cluster, work, lo)
            assert set(e.tier_busy_s) == {t.name for t in cluster.tiers}
            for name, busy in e.tier_busy_s.items():
                assert 0 <= busy <= e.step_time_s * (1 + 1e-12), (preset, name, lo)
            # Busy time counts every flow: at least each axis's own link-busy time on its tiers
            # (the breakdown's comm terms never exceed the step either).
            assert sum(e.tier_busy_s.values()) >= e.comm_total_s["pp"] * (1 - 1e-9)


def test_thin_wan_is_slower_than_its_cross_site_traffic() -> None:
    """Two sites, a 100 Gb/s WAN shared by 8,192 GPUs per site: PP crosses it. The step cannot be
    shorter than the pipeline's own WAN bytes over the WAN bandwidth (by hand below)."""
    base = models_zoo.load_cluster("two-dc-h100")
    wan = base.tiers[2].model_copy(update={"bandwidth_gb_per_s": 12.5 / 8192})
    cluster = base.model_copy(update={"tiers": (*base.tiers[:2], wan)})
    model = models_zoo.load_model("llama3.1-70b")
    work = Workload(seq_len=8192, global_batch_seqs=2048)
    lo = Layout(tp=8, pp=8, dp=256, recompute="selective", sequence_parallel=True)
    e = estimate(model, cluster, work, lo)
    # 8 micro-batches, each sends its activations forward and gradients back across the WAN:
    # 2 x 8 sends of 8192 tokens x 8192 hidden x 2 B / TP 8 = 16.8 MB, 5 ms + bytes / (BW x 0.9).
    payload = 8192 * 8192 * 2 / 8
    send_s = 5e-3 + payload / (12.5e9 / 8192 * 0.9)
    assert e.tier_busy_s["wan"] == pytest.approx(16 * send_s, rel=1e-9)
    assert e.step_time_s >= 16 * send_s
    # The preset's own 0.78 GB/s per GPU hides most of it; the thin WAN cannot.
    thick = estimate(model, base, work, lo)
    assert thick.step_time_s < e.step_time_s / 10


def test_thin_wan_warns_that_cross_site_traffic_cannot_hide() -> None:
    from planner.report.findings import plan_warnings

    base = models_zoo.load_cluster("two-dc-h100")
    wan = base.tiers[2].model_copy(update={"bandwidth_gb_per_s": 12.5 / 8192})
    thin = base.model_copy(update={"tiers": (*base.tiers[:2], wan)})
    model = models_zoo.load_model("llama3.1-70b")
    work = Workload(seq_len=8192, global_batch_seqs=2048)
    lo = Layout(tp=8, pp=8, dp=256, recompute="selective", sequence_parallel=True)
    assert any("cannot hide" in w for w in plan_warnings(thin, estimate(model, thin, work, lo)))
    assert not any("cannot hide" in w for w in plan_warnings(base, estimate(model, base, work, lo)))


def test_diloco_amortises_cross_site_dp_traffic() -> None:
    """Two sites, DP across the WAN: synchronising every 8 steps puts 1/8 of the WAN phase of the
    DP reduction in each step; the within-site phases are unchanged."""
    cluster = models_zoo.load_cluster("two-dc-h100", 16384)
    model = models_zoo.load_model("llama3.1-8b")
    lo = Layout(tp=8, dp=2048, zero_stage=1, sequence_parallel=True)
    sync = Workload(seq_len=4096, global_batch_seqs=4096)
    every8 = sync.model_copy(update={"cross_site_sync_every": 8})
    a, b = estimate(model, cluster, sync, lo), estimate(model, cluster, every8, lo)
    assert b.tier_busy_s["wan"] == pytest.approx(a.tier_busy_s["wan"] / 8)
    assert b.tier_busy_s["site"] == pytest.approx(a.tier_busy_s["site"])
    assert b.step_time_s < a.step_time_s
