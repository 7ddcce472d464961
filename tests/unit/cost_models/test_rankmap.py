"""cost_models.rankmap: the groups are Megatron-Core's, and the spans priced are their spans."""

from __future__ import annotations

import itertools

import pytest

import models_zoo
from cost_models import rankmap, topology
from cost_models.specs import Axis, Layout

ORDERS = list(itertools.permutations((Axis.TP, Axis.CP, Axis.DP, Axis.PP)))
TP_CP_PP_DP = (Axis.TP, Axis.CP, Axis.PP, Axis.DP)


def test_groups_match_megatron_docstring_example():
    # megatron/core/parallel_state.py generate_masked_orthogonal_rank_groups: order tp-pp-dp,
    # sizes 2-2-2 -> dp groups [[0, 4], [1, 5], [2, 6], [3, 7]].
    lo = Layout(tp=2, pp=2, dp=2, order=TP_CP_PP_DP)
    groups = rankmap.rank_groups(lo, moe=False)
    assert groups["dp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert groups["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert groups["pp"] == [[0, 2], [1, 3], [4, 6], [5, 7]]


def test_expert_groups_follow_the_expert_grid_inside_a_stage():
    # tp-cp-ep-dp-pp with tp 2, cp 2, dp 2, pp 2, ep 4, etp 1: the expert grid is
    # etp 1, ep 4, edp 2, pp 2, so EP groups are 4 consecutive ranks inside one stage.
    lo = Layout(tp=2, cp=2, dp=2, pp=2, ep=4)
    groups = rankmap.rank_groups(lo)
    assert groups["ep"][:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert groups["edp"][0] == [0, 4]
    assert all(len({r // 8 for r in g}) == 1 for g in groups["ep"])  # one pipeline stage
    assert groups["dp_cp"][0] == [0, 2, 4, 6]


def test_dense_model_has_no_expert_dp_group():
    lo = Layout(tp=2, dp=4)
    assert "edp" not in rankmap.rank_groups(lo, moe=False)
    cluster = models_zoo.load_cluster("dgx-h100", 8)
    assert "edp" not in topology.spans(cluster, lo, moe=False)


def test_expert_pp_mismatch_is_megatrons_assertion():
    # tp-cp-ep-pp-dp: PP groups agree only when etp*ep == tp*cp (expert-DP == DP).
    assert rankmap.expert_pp_mismatch(Layout(tp=4, dp=4, pp=2, ep=4, order=TP_CP_PP_DP)) is None
    assert rankmap.expert_pp_mismatch(Layout(tp=2, dp=4, pp=4, ep=8, order=TP_CP_PP_DP))
    assert rankmap.expert_pp_mismatch(Layout(tp=2, dp=4, pp=4, ep=8)) is None  # PP last


def _cases():
    """(cluster, layouts): DGX (8), NVL72 (72, not a power of two), a 3,072-GPU pod preset."""
    dgx = models_zoo.load_cluster("dgx-h100", 64)
    nvl = models_zoo.load_cluster("gb200-nvl72", 288)
    pod = models_zoo.load_cluster("llama3-roce-24k", 6144)
    yield (
        dgx,
        [
            {"tp": 2, "cp": 2, "dp": 4, "pp": 4, "ep": 8},
            {"tp": 4, "cp": 2, "dp": 4, "pp": 2, "ep": 4, "etp": 2},
            {"tp": 8, "dp": 8, "ep": 8},
            {"tp": 1, "cp": 4, "dp": 2, "pp": 8, "ep": 2},
        ],
    )
    yield (
        nvl,
        [
            {"tp": 4, "cp": 2, "dp": 9, "pp": 4, "ep": 8},
            {"tp": 8, "dp": 12, "pp": 3, "ep": 4, "etp": 2},
            {"tp": 16, "dp": 9, "pp": 2, "ep": 16},
            {"tp": 2, "cp": 3, "dp": 16, "pp": 3, "ep": 32},
        ],
    )
    yield pod, [{"tp": 8, "cp": 2, "dp": 128, "pp": 3, "ep": 16, "etp": 2}]


@pytest.mark.parametrize("cluster, layouts", list(_cases()), ids=lambda c: getattr(c, "name", ""))
def test_spans_priced_equal_spans_of_emitted_groups(cluster, layouts):
    """Every order, ep/pp/cp/etp > 1: the spans the cost model prices are those of the groups
    `--emit ranks` prints (recomputed from the rank lists by the rule, not the closed form)."""
    domains = rankmap.tier_domains(cluster)
    checked = 0
    for fields in layouts:
        for order in ORDERS:
            lo = Layout(**fields, order=order)
            for moe in (True, False) if lo.ep == 1 == lo.etp else (True,):
                groups = rankmap.rank_groups(lo, moe=moe)
                priced = topology.spans(cluster, lo, moe=moe)
                assert set(priced) == set(groups)
                for kind, lists in groups.items():
                    assert sorted(r for g in lists for r in g) == list(range(lo.world_size))
                    want = rankmap.span_of_groups(lists, domains)
                    assert priced[kind] == want, (cluster.name, lo.order, kind)
                checked += 1
    assert checked == len(layouts) * len(ORDERS)


def test_worst_group_is_priced_on_nvl72():
    # TP 16 on 72-GPU domains: group 64..79 has 8 GPUs in each of two domains, so TP pays the
    # outer tier even though group 0..15 sits in one domain.
    nvl = models_zoo.load_cluster("gb200-nvl72", 288)
    lo = Layout(tp=16, dp=18)
    assert topology.spans(nvl, lo, moe=False)["tp"] == (8, 16)
    # A DP group of 16 ranks 8 apart: the worst group has one rank alone in a domain.
    assert topology.spans(nvl, Layout(tp=8, dp=16, pp=9).model_copy(), moe=False)["dp"][0] < 8


def _megatron_groups(world_size, parallel_size, mask):
    """generate_masked_orthogonal_rank_groups as written in megatron/core/parallel_state.py."""

    def prefix_product(a, init=1):
        r = [init]
        for v in a:
            init = init * v
            r.append(init)
        return r

    def inner_product(a, b):
        return sum([x * y for x, y in zip(a, b, strict=False)])

    def decompose(index, shape):
        stride = prefix_product(shape)
        return [(index // d) % s for s, d in zip(shape, stride, strict=False)]

    masked_shape = [s for s, m in zip(parallel_size, mask, strict=True) if m]
    unmasked_shape = [s for s, m in zip(parallel_size, mask, strict=True) if not m]
    global_stride = prefix_product(parallel_size)
    masked_stride = [d for d, m in zip(global_stride, mask, strict=False) if m]
    unmasked_stride = [d for d, m in zip(global_stride, mask, strict=False) if not m]
    group_size = prefix_product(masked_shape)[-1]
    ranks = []
    for group_index in range(world_size // group_size):
        g = decompose(group_index, unmasked_shape)
        ranks.append(
            [
                inner_product(decompose(i, masked_shape), masked_stride)
                + inner_product(g, unmasked_stride)
                for i in range(group_size)
            ]
        )
    return ranks


def test_group_lists_equal_megatrons_generator():
    import math
    import random

    rng = random.Random(0)
    names = ["tp", "cp", "ep", "dp", "pp"]
    for _ in range(300):
        sizes = [rng.choice([1, 2, 3, 4]) for _ in names]
        tokens = [n for n in names if rng.random() < 0.5] or ["tp"]
        mask = [n in tokens for n in names]
        dims = tuple(zip(names, sizes, strict=True))
        assert rankmap._groups(dims, tokens) == _megatron_groups(math.prod(sizes), sizes, mask)


def test_estimate_spans_override_prices_the_given_groups():
    """estimate(spans=...) replaces the spans of the layout's order (placement on a real
    allocation prices an explicit rank -> host map this way); kinds left out keep the layout's."""
    import factories

    from cost_models.estimate import estimate

    model, cluster = factories.moe_model(), factories.cluster(16)
    work = factories.workload(global_batch=32)
    lo = Layout(tp=2, dp=8, ep=8)
    own = topology.spans(cluster, lo)
    assert own["ep"] == (8, 8)  # EP 8 of stride 1: one node
    same = estimate(model, cluster, work, lo, spans={"ep": own["ep"]})
    assert same.step_time_s == estimate(model, cluster, work, lo).step_time_s
    split = estimate(model, cluster, work, lo, spans={"ep": (4, 8)})  # two nodes
    assert split.breakdown_s["ep_comm"] > same.breakdown_s["ep_comm"]
    assert split.placement["ep"] == {cluster.tiers[0].name: 4, cluster.tiers[1].name: 2}
