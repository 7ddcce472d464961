"""The candidate space includes the rank order (placement), one per distinct placement."""

import itertools

import factories

from cost_models.estimate import estimate
from cost_models.specs import Layout, Workload
from planner.search.candidates import ALL_ORDERS, CANONICAL_ORDER, OrderCache, placement_key


def test_all_orders_are_the_24_permutations_canonical_first():
    assert ALL_ORDERS[0] == CANONICAL_ORDER
    assert sorted(ALL_ORDERS) == sorted(itertools.permutations(CANONICAL_ORDER))


def test_orders_with_equal_placement_key_give_equal_estimates():
    cluster = factories.cluster(64)
    model = factories.dense_model()
    work = Workload(seq_len=4096, global_batch_seqs=64)
    base = Layout(tp=2, pp=2, dp=8, cp=2, sequence_parallel=True)
    groups: dict[tuple, list[Layout]] = {}
    for order in ALL_ORDERS:
        lo = base.model_copy(update={"order": order})
        groups.setdefault(placement_key(cluster, lo), []).append(lo)
    assert 1 < len(groups) < 24
    for members in groups.values():
        times = {estimate(model, cluster, work, lo).step_time_s for lo in members}
        assert len(times) == 1
    kept = OrderCache(cluster).orders(base)  # moe default True: same spans plus expert ones
    assert len(kept) == len(groups) and kept[0] == CANONICAL_ORDER


def test_order_search_can_be_switched_off():
    assert OrderCache(factories.cluster(64), search=False).orders(Layout(tp=2, dp=32)) == (
        CANONICAL_ORDER,
    )


def test_cached_spans_equal_topology_spans():
    """OrderCache assembles spans from memoized group spans; every order's cached spans
    must be what topology.spans gives for that order (multi-tier, non-power-of-two domains)."""
    from cost_models import topology
    from models_zoo import load_cluster

    clusters = [factories.cluster(64), load_cluster("dgx-h100", 1024)]
    clusters += [
        load_cluster(name, n)
        for name, n in (
            ("gb200-nvl72", 288),
            ("h800", 2048),
            ("tpu-v5p-4096", 4096),
            ("two-dc-h100", 2048),
            ("llama3-roce-24k", 16384),
            ("dgx-h100-superpod", 131072),
        )
    ]
    degrees = [
        {"tp": 1, "cp": 1, "dp": 64, "pp": 1},
        {"tp": 1, "cp": 4, "dp": 1, "pp": 16, "ep": 4},
        {"tp": 8, "cp": 1, "dp": 8, "pp": 1, "ep": 8},
        {"tp": 2, "cp": 2, "dp": 4, "pp": 4, "ep": 16},
        {"tp": 4, "cp": 1, "dp": 1, "pp": 16},
        {"tp": 1, "cp": 1, "dp": 8, "pp": 8, "ep": 2},
    ]
    for cluster in clusters:
        cache = OrderCache(cluster, moe=False)
        for d in degrees:
            scale = cluster.num_gpus // 64
            base = Layout(**{**d, "dp": d["dp"] * scale})
            for order in ALL_ORDERS:
                lo = base.model_copy(update={"order": order})
                want = {k: tuple(v) for k, v in topology.spans(cluster, lo, moe=False).items()}
                assert cache.spans(base, order) == want, (cluster.name, lo)
            kept = cache.orders(base)
            full = {
                placement_key(cluster, base.model_copy(update={"order": o}), moe=False)
                for o in ALL_ORDERS
            }
            assert len(kept) == len(full)
