"""Collective algorithms as NCCL's tuner picks them (src/graph/tuning.cc), by hand."""

from __future__ import annotations

import pytest

from cost_models import comm
from cost_models.specs import LinkTier

US = 1e-6


def tier(name: str, domain: int | None, bw: float, lat_us: float, **kw: object) -> LinkTier:
    return LinkTier.model_validate(
        {
            "name": name,
            "domain_size": domain,
            "bandwidth_gb_per_s": bw,
            "latency_us": lat_us,
            "efficiency": 1.0,
            **kw,
        }
    )


NVL = tier("nvlink", 8, 400, 2.0, kind="nvlink")
NET = tier("ib", None, 50, 5.0)


def test_ring_latency_grows_with_ranks_large_messages_take_ring() -> None:
    # 1 GB all-gather over 64 nodes, one GPU each: ring 63/64 GB / 50 GB/s + 63 x 5 us;
    # PAT 0.75 of the bandwidth + log2(64) x 5 / 3.5 + 64 x 2.8 us: ring is cheaper.
    got = comm.collective_time_s("all_gather", 1e9, [1, 64], (NVL, NET))
    assert got == pytest.approx(63 / 64 * 1e9 / 50e9 + 63 * 5 * US)


def test_pat_wins_medium_all_gather_with_one_gpu_per_node() -> None:
    # 4 MB over 64 nodes (one GPU each): ring LL 63/64 x 4 MB / (0.5 x 50 GB/s) + 63 x 2.7 us,
    # LL128 / 0.92 + 63 x 4.0 us, Simple + 63 x 5 us; PAT / 0.75 + 6 x 5 / 3.5 + 64 x 2.8 us.
    size, rf = 4e6, 63 / 64
    rings = [
        rf * size / (0.5 * 50e9) + 63 * 2.7 * US,
        rf * size / (0.92 * 50e9) + 63 * 4.0 * US,
        rf * size / 50e9 + 63 * 5 * US,
    ]
    pat = rf * size / (0.75 * 50e9) + 6 * 5 / 3.5 * US + 64 * 2.8 * US
    assert pat < min(rings)
    assert comm.collective_time_s("all_gather", size, [1, 64], (NVL, NET)) == pytest.approx(pat)
    # 64 KB: the LL ring's 2.7 us steps beat PAT's 2.8 us per rank (NCCL's tuner agrees).
    small = comm.collective_time_s("all_gather", 65536, [1, 64], (NVL, NET))
    assert small == pytest.approx(rf * 65536 / (0.5 * 50e9) + 63 * 2.7 * US)


def test_flat_ring_across_nodes_matches_nccl_tuner() -> None:
    """NCCL's ring is flat over every rank: 1 KiB all-gather over 16,384 ranks (8 per node):
    14,336 intra-node steps at the 1 us network overhead and 2,047 network steps at LL's
    2.7 us = 19,864 us; NCCL's tuner (tuning.cc, LL: base 6.6 us + the same steps) 19,870 us.
    The hierarchical ring it replaces charged 7 x 3 + 2,047 x 6 = 12,303 us."""
    nvl = tier("nvlink", 8, 450, 3.0, kind="nvlink")
    ib = tier("ib", None, 50, 6.0)
    got = comm.collective_time_s("all_gather", 1024, [8, 16384], (nvl, ib))
    steps = 14336 * 1.0 + 2047 * 2.7
    bytes_s = 7 / 8 * 1024 / (0.5 * 450e9) + 2047 / 2048 * 1024 / 8 / (0.5 * 50e9)
    assert got == pytest.approx(steps * US + bytes_s)
    assert got == pytest.approx(19870 * US, rel=0.2)
    # All-reduce takes the tree: 2 x log2(2,048) levels of LL's 5 us, near NCCL's 125 us.
    ar = comm.collective_time_s("all_reduce", 1024, [8, 16384], (nvl, ib))
    assert ar == pytest.approx(125.2 * US, rel=0.2)


def test_tree_wins_small_all_reduce() -> None:
    # 1 MB all-reduce over 64 nodes: ring 2 x 63/64 MB / 50 GB/s + 126 x 5 us;
    # tree 2 / 0.92 MB / 50 GB/s + 2 x 6 x 5 us.
    ring = 2 * 63 / 64 * 1e6 / (0.5 * 50e9) + 126 * 2.7 * US  # LL, the cheapest ring here
    tree = 2 * 1e6 / (0.92 * 50e9) + 12 * 5 * US
    assert tree < ring
    assert comm.collective_time_s("all_reduce", 1e6, [1, 64], (NVL, NET)) == pytest.approx(tree)
    # Restricted to ring (NCCL_ALGO=Ring), the cluster file gets the ring time.
    ring_only = NET.model_copy(update={"algorithms": ("ring",)})
    got = comm.collective_time_s("all_reduce", 1e6, [1, 64], (NVL, ring_only))
    assert got == pytest.approx(ring)


def test_nvls_and_sharp_move_the_payload_once() -> None:
    nvls = NVL.model_copy(update={"nvls": True})
    # 1 GB all-reduce inside one NVSwitch domain of 8: once over the link + 2 steps.
    got = comm.collective_time_s("all_reduce", 1e9, [8, 8], (nvls, NET))
    assert got == pytest.approx(1e9 / 400e9 + 2 * 2 * US)
    without = comm.collective_time_s("all_reduce", 1e9, [8, 8], (NVL, NET))
    assert without == pytest.approx(2 * 7 / 8 * 1e9 / 400e9 + 14 * 2 * US)
    sharp = NET.model_copy(update={"sharp": True})
    got = comm.collective_time_s("all_reduce", 1e9, [1, 64], (NVL, sharp))
    assert got == pytest.approx(1e9 / 50e9 + 2 * 5 * US)
    # NCCL >= 2.20 with SHARP 3.5.2 offloads all-gather and reduce-scatter too (CollNetDirect):
    # the ring's bytes in one step up and one down instead of 63 ring steps.
    for kind in ("all_gather", "reduce_scatter"):
        got = comm.collective_time_s(kind, 1e9, [1, 64], (NVL, sharp))
        assert got == pytest.approx(63 / 64 * 1e9 / 50e9 + 2 * 5 * US)
        assert got < comm.collective_time_s(kind, 1e9, [1, 64], (NVL, NET))


def test_buckets_pay_latency_each() -> None:
    # 4 GB reduce-scatter over 64 nodes in 100 buckets of 40 MB: ring per bucket.
    one = comm.collective_time_s("reduce_scatter", 4e9, [1, 64], (NVL, NET))
    many = comm.collective_time_s("reduce_scatter", 4e9, [1, 64], (NVL, NET), buckets=100)
    assert one == pytest.approx(63 / 64 * 4e9 / 50e9 + 63 * 5 * US)
    assert many == pytest.approx(63 / 64 * 4e9 / 50e9 + 100 * 63 * 5 * US)


def test_zero3_over_2048_ranks_pays_ring_latency() -> None:
    # Issue 16: ZeRO-3 all-gather over 2,048 ranks (256 nodes x 8) at 800 Gb/s used to pay
    # ~84 us; the ring's 255 inter-node steps cost 255 x 5 us alone.
    fast = NET.model_copy(update={"bandwidth_gb_per_s": 100})
    got = comm.collective_time_s("all_gather", 1e6, [8, 2048], (NVL, fast))
    assert got > 255 * 5 * US
