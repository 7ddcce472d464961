"""The issue 13 repro: every ranked plan is priced from the groups `--emit ranks` prints."""

from __future__ import annotations

import planner
from cost_models import rankmap, topology
from planner.export import plan_exports


def test_qwen3_moe_plans_are_priced_from_their_emitted_groups():
    result = planner.plan_for(
        "qwen3-30b-a3b",
        "dgx-h100",
        num_gpus=64,
        global_batch=256,
        seq_len=4096,
        top_k=5,
        top_variants=True,
        rank_orders=None,  # every order, as --all-orders
    )
    domains = rankmap.tier_domains(result.cluster)
    orders = {e.layout.order for e in result.ranked}
    for i, e in enumerate(result.ranked):
        groups = plan_exports.to_rank_groups(result, i)
        priced = topology.spans(result.cluster, e.layout)
        for kind in ("tp", "cp", "dp", "pp", "dp_cp", "ep", "etp", "edp"):
            assert priced[kind] == rankmap.span_of_groups(groups[kind], domains), (i, kind)
        # The EP factor the report shows on each tier is that of the emitted EP groups.
        nodes = max(len({r // result.cluster.gpus_per_node for r in g}) for g in groups["ep"])
        assert e.placement["ep"][result.cluster.tiers[-1].name] == nodes
    assert len(orders) >= 1
