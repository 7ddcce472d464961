"""Each `plan` search flag maps to one planner.plan keyword, and that keyword is a real field."""

import factories
import pytest

import planner
from cost_models.errors import InvalidInput
from planner import cli
from planner.types import SearchSpace, SolverOptions

ARGV = [
    "plan", "--model", "m", "--cluster", "c", "--top", "3", "--time-limit", "5", "--work-limit", "900",
    "--max-nodes", "4", "--tp", "2", "--pp", "2", "--dp", "8", "--cp", "1", "--ep", "1",
    "--max-tp", "8", "--max-pp", "4", "--max-cp", "2", "--max-ep", "8",
    "--memory-headroom", "0.2", "--recompute", "none", "full", "--zero", "1", "3",
    "--micro-batches", "1", "2", "--max-vp", "2", "--no-order-search", "--engine", "exhaustive",
    "--no-deterministic", "--seed", "7", "--stage-split", "search", "--all-orders",
    "--top-variants", "--simplicity-tolerance", "0.02",
    "--pp-schedules", "1f1b", "--ep-overlap", "--cpu-offload-layers", "4",
    "--account-for-embedding-in-pipeline-split", "--no-account-for-loss-in-pipeline-split",
]  # fmt: skip


def test_every_search_flag_maps_to_a_field():
    args = cli.build_parser().parse_args(ARGV)
    kwargs = cli.search_kwargs(args)
    assert set(kwargs) == set(cli.SEARCH_FLAGS.values())
    fields = set(SearchSpace.model_fields) | set(SolverOptions.model_fields) | {"max_nodes"}
    assert set(kwargs) <= fields
    space = SearchSpace(**{k: v for k, v in kwargs.items() if k in SearchSpace.model_fields})
    opts = SolverOptions(**{k: v for k, v in kwargs.items() if k in SolverOptions.model_fields})
    assert (space.tp, space.max_ep, space.zero_stages) == (2, 8, (1, 3))
    assert space.recompute == ("none", "full") and space.search_order is False
    assert space.stage_split == "search" and space.rank_orders is None  # --all-orders: all 24
    assert space.cpu_offload_layers == 4
    assert space.account_for_embedding_in_pipeline_split is True
    assert space.account_for_loss_in_pipeline_split is False
    assert (opts.top_k, opts.engine, opts.deterministic, opts.seed) == (3, "exhaustive", False, 7)
    assert opts.top_variants is True and opts.simplicity_tolerance == 0.02
    assert (opts.time_limit_s, opts.work_limit) == (5.0, 900.0)


def test_unset_flags_keep_library_defaults():
    args = cli.build_parser().parse_args(["plan", "--model", "m", "--cluster", "c"])
    kwargs = cli.search_kwargs(args)
    assert kwargs["engine"] == "branch-and-bound" and kwargs["deterministic"] is True
    assert "recompute" not in kwargs and "tp" not in kwargs
    assert "rank_orders" not in kwargs  # the default: the orders Megatron-Core builds


def test_max_nodes_caps_the_gpu_count():
    model, cluster = factories.dense_model(num_layers=8), factories.cluster(64)
    r = planner.plan_for(
        model, cluster, global_batch=16, max_nodes=2, tp=8, top_k=1, micro_batches=(1,)
    )
    assert r.cluster.num_gpus == 16
    with pytest.raises(InvalidInput, match="max_nodes"):
        planner.plan_for(model, cluster, num_gpus=32, max_nodes=2)


def test_pinned_axis_that_cannot_hold_says_why():
    from cost_models.errors import NoFeasiblePlan

    model, cluster = factories.dense_model(num_attention_heads=8), factories.cluster(16)
    with pytest.raises(NoFeasiblePlan, match="tp .* must divide num_attention_heads"):
        factories.plan(model, cluster, factories.workload(), tp=16, pp=1)
