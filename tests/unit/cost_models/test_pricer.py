"""The Pricer: one Pricer reused over many layouts prices each exactly as a fresh estimate();
its lower bounds never exceed the step they bound (random layouts and splits); its cache keys
leave out only fields the cached piece does not read; cost_models has no import cycle."""

import ast
import itertools
import random
from pathlib import Path

import factories
import pytest

from cost_models import stage as st
from cost_models.bounds import NOT_IN_DP
from cost_models.estimate import estimate
from cost_models.pricer import (
    DENSE_TIME_READS,
    LAYER_ACTIVATION_READS,
    LAYER_TIME_READS,
    NOT_IN_ACTIVATIONS,
    NOT_IN_LAYER_COST,
    NOT_IN_STAGE_PARAMS,
    Pricer,
)
from cost_models.rules import layout_violations
from cost_models.specs import Layout, Workload
from planner.search.candidates import enumerate_layouts
from planner.types import SearchSpace

SPACE = SearchSpace(
    max_vp=2,
    micro_batches=(1, 2),
    pp_schedules=("1f1b", "dualpipe"),
    ep_overlap=(False, True),
)
BLOCK = {
    "recompute": "full",
    "recompute_method": "block",
    "recompute_num_layers": 1,
    "recompute_modules": None,
}


def _cases():
    cluster = factories.cluster(32, ib_gb_per_s=25)
    work = Workload(seq_len=4096, global_batch_seqs=64)
    yield factories.dense_model(num_layers=12), cluster, work
    moe_work = Workload(seq_len=4096, global_batch_seqs=64, moe_dispatcher="deepep")
    yield factories.moe_model(num_layers=10), cluster, moe_work


def _sample(model, cluster, work, n: int, rng: random.Random) -> list[Layout]:
    """n random legal layouts, some turned to block recompute where that stays legal."""
    layouts, _ = enumerate_layouts(model, cluster, work, SPACE)
    out = rng.sample(layouts, min(n, len(layouts)))
    for lo in rng.sample(out, len(out) // 4):
        block = lo.model_copy(update=BLOCK)
        if not layout_violations(model, cluster, work, block):
            out.append(block)
    return out


def _random_split(layers: int, chunks: int, rng: random.Random) -> tuple[int, ...]:
    cuts = sorted(rng.sample(range(1, layers), chunks - 1))
    edges = [0, *cuts, layers]
    return tuple(b - a for a, b in itertools.pairwise(edges))


def test_one_pricer_prices_every_layout_as_a_fresh_estimate():
    rng = random.Random(3)
    for model, cluster, work in _cases():
        pricer = Pricer(model, cluster, work)
        for lo in _sample(model, cluster, work, 60, rng):
            assert pricer.estimate(lo) == estimate(model, cluster, work, lo), lo


def test_bounds_never_above_the_step_on_random_layouts_and_splits():
    """Admissibility (cost_models/bounds.py's proof), checked: every bound <= the step of the
    layout it bounds, for the even split and for random splits."""
    rng = random.Random(17)
    for model, cluster, work in _cases():
        pricer = Pricer(model, cluster, work)
        for lo in _sample(model, cluster, work, 80, rng):
            step = estimate(model, cluster, work, lo).step_time_s
            span = pricer.spans(lo)
            order_free = pricer.step_bound_s(lo)
            placed = pricer.placement_bound_s(lo, span)
            with_dp = pricer.placement_bound_s(lo, span, with_dp=True)
            assert 0 < order_free * (1 - 1e-6) <= placed <= with_dp <= step, lo
            assert pricer.placement_bounds_s(lo, [span], any_split=True)[0] <= step, lo
            if lo.pp == 1 or model.num_layers < lo.pp * lo.vp:
                continue
            split = _random_split(model.num_layers, lo.pp * lo.vp, rng)
            split_step = estimate(model, cluster, work, lo, layers_per_stage=split).step_time_s
            counts = pricer.stage_counts(lo, split)
            assert pricer.placement_bounds_s(lo, [span], counts=counts)[0] <= split_step, lo
            assert pricer.placement_bounds_s(lo, [span], any_split=True)[0] <= split_step, lo


# Another value for each Layout field (model_copy does not validate: pieces are priced as is).
OTHER = {
    "tp": 4,
    "pp": 4,
    "dp": 8,
    "cp": 4,
    "ep": 4,
    "etp": 2,
    "vp": 2,
    "micro_batch": 2,
    "recompute": "full",
    "zero_stage": 3,
    "sequence_parallel": True,
    "order": ("pp", "dp", "cp", "tp"),
    "tp_comm_overlap": True,
    "recompute_modules": ("core_attn", "mlp"),
    "recompute_method": "uniform",
    "recompute_num_layers": 2,
    "dp_shard": 2,
    "pp_schedule": "dualpipe",
    "ep_overlap": True,
    "cpu_offload_layers": 2,
    "account_for_embedding_in_pipeline_split": True,
    "account_for_loss_in_pipeline_split": True,
}


def _other(lo: Layout, field: str) -> Layout:
    value = OTHER[field]
    assert getattr(lo, field) != value
    return lo.model_copy(update={field: value})


@pytest.mark.parametrize("field", sorted(set(Layout.model_fields) - set(LAYER_TIME_READS)))
def test_layer_time_key_holds_every_field_it_reads(field):
    for model, cluster, work in _cases():
        lo = Layout(tp=2, pp=2, dp=4, cp=2, ep=2 if model.moe else 1, recompute="selective")
        a = Pricer(model, cluster, work).layer_times(lo)
        assert a == Pricer(model, cluster, work).layer_times(_other(lo, field))


@pytest.mark.parametrize("field", sorted(set(LAYER_TIME_READS) - set(DENSE_TIME_READS)))
def test_dense_time_key_holds_every_field_it_reads(field):
    """A dense layer's, the LM head's and the embedding's times do not move with the expert
    splits: Pricer prices them once per DENSE_TIME_READS (checked on the uncached functions)."""
    from cost_models.calibration import calibration_for_cluster
    from cost_models.compute import embedding_time, layer_time, lm_head_time

    for model, cluster, work in _cases():
        lo = Layout(tp=2, pp=2, dp=4, cp=2, ep=2 if model.moe else 1, recompute="selective")
        other = _other(lo, field)
        gpu, cal = cluster.gpu, calibration_for_cluster(cluster)
        for x in (lo, other):
            assert layer_time(model, gpu, cal, work, x, is_moe=False) == layer_time(
                model, gpu, cal, work, lo, is_moe=False
            )
            assert lm_head_time(model, gpu, cal, work, x) == lm_head_time(model, gpu, cal, work, lo)
            assert embedding_time(model, gpu, cal, work, x) == embedding_time(
                model, gpu, cal, work, lo
            )
        if model.moe is not None:  # the MoE layer does read it (the key must keep it there)
            assert layer_time(model, gpu, cal, work, other, is_moe=True) != layer_time(
                model, gpu, cal, work, lo, is_moe=True
            )
        assert Pricer(model, cluster, work).layer_times(other) == Pricer(
            model, cluster, work
        ).layer_times(other)


@pytest.mark.parametrize("field", NOT_IN_ACTIVATIONS)
def test_stage_bytes_key_leaves_out_only_unread_fields(field):
    """Pricer.stage_memory caches a stage's activation bytes across the ZeRO stages and orders
    of a shape (NOT_IN_ACTIVATIONS): the uncached functions agree. The buffers are not cached:
    DeepSpeed's ipg bucket reads the ZeRO stage (memory.buffer_bytes), so a DeepSpeed workload
    is among the cases."""
    from cost_models import framework

    cases = list(_cases())
    model, cluster, work = cases[0]
    cases.append((model, cluster, framework.DEEPSPEED.workload(work)))
    for model, cluster, work in cases:
        for base in (Layout(tp=2, pp=4, dp=4, recompute="selective"), Layout(tp=2, pp=4, dp=4)):
            lo, other = base, _other(base, field)
            pricer = Pricer(model, cluster, work)
            acts, counts = pricer.activations_per_mb(lo), pricer.stage_counts(lo)
            m = 64 // (lo.dp * lo.micro_batch)
            for r in range(lo.pp):
                a = st.stage_activation_bytes(model, work, lo, r, counts[r], acts, m)
                b = st.stage_activation_bytes(model, work, other, r, counts[r], acts, m)
                assert a == b
            fresh = Pricer(model, cluster, work)
            for r in range(lo.pp):  # cached after `lo`, fresh for `other`: the same bytes
                pricer.stage_memory(lo, r, counts)
                x, y = pricer.stage_memory(other, r, counts), fresh.stage_memory(other, r, counts)
                assert x == y


@pytest.mark.parametrize("field", NOT_IN_LAYER_COST)
def test_layer_cost_key_leaves_out_only_unread_fields(field):
    for model, cluster, work in _cases():
        lo = Layout(tp=2, pp=2, dp=4, cp=2, ep=2 if model.moe else 1, recompute="selective")
        span = Pricer(model, cluster, work).spans(lo)
        a = Pricer(model, cluster, work).layer_costs(lo, span)
        b = Pricer(model, cluster, work).layer_costs(_other(lo, field), span)
        assert a == b


@pytest.mark.parametrize("field", NOT_IN_STAGE_PARAMS)
def test_stage_params_key_leaves_out_only_unread_fields(field):
    for model, cluster, work in _cases():
        lo = Layout(tp=2, pp=2, dp=8, ep=2 if model.moe else 1)
        counts = (3, 2) if model.moe else (5, 0)
        for r in (0, 1):
            a = Pricer(model, cluster, work).stage_params(lo, counts, r)
            b = Pricer(model, cluster, work).stage_params(_other(lo, field), counts, r)
            assert a == b


@pytest.mark.parametrize("field", sorted(set(Layout.model_fields) - set(LAYER_ACTIVATION_READS)))
def test_layer_activation_key_holds_every_field_it_reads(field):
    for model, cluster, work in _cases():
        for rc in ("selective", "full", "none"):
            lo = Layout(tp=2, pp=2, dp=4, cp=2, recompute=rc, sequence_parallel=True)
            if field in ("recompute_method", "recompute_num_layers") and rc != "full":
                continue  # (a Layout the cost model never sees)
            a = Pricer(model, cluster, work).activations_per_mb(lo)
            assert a == Pricer(model, cluster, work).activations_per_mb(_other(lo, field))


@pytest.mark.parametrize("field", NOT_IN_ACTIVATIONS)
def test_activation_key_leaves_out_only_unread_fields(field):
    for model, cluster, work in _cases():
        lo = Layout(tp=2, pp=2, dp=8, recompute="selective")
        a = Pricer(model, cluster, work).activations_per_mb(lo)
        b = Pricer(model, cluster, work).activations_per_mb(_other(lo, field))
        assert a == b


@pytest.mark.parametrize("field", NOT_IN_DP)
def test_dp_key_leaves_out_only_unread_fields(field):
    for model, cluster, work in _cases():
        lo = Layout(tp=2, pp=2, dp=8, zero_stage=1)
        span = Pricer(model, cluster, work).spans(lo)
        a = Pricer(model, cluster, work).dp_optimizer_s(lo, span)
        b = Pricer(model, cluster, work).dp_optimizer_s(_other(lo, field), span)
        assert a == b


def test_calibration_is_derived_once_per_pricer(monkeypatch):
    import cost_models.pricer as pricer_module

    calls = []
    real = pricer_module.calibration_for_cluster
    monkeypatch.setattr(
        pricer_module, "calibration_for_cluster", lambda c: calls.append(c) or real(c)
    )
    model, cluster, work = next(_cases())
    pricer = Pricer(model, cluster, work)
    for lo in _sample(model, cluster, work, 5, random.Random(1)):
        pricer.estimate(lo)
    assert len(calls) == 1
    assert not hasattr(st, "calibration_for_cluster")  # stage.py is handed the calibration


def _imports(path: Path, package: str) -> set[str]:
    """Modules of `package` a module imports (`from . import x` counts as the package)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out.add(f"{package}.{node.module}" if node.module else package)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith(package)}
    return out


def test_cost_models_has_no_import_cycle():
    root = Path(__file__).resolve().parents[3] / "cost_models"
    graph = {
        ("cost_models" if p.stem == "__init__" else f"cost_models.{p.stem}"): _imports(
            p, "cost_models"
        )
        for p in root.glob("*.py")
    }
    for module, deps in graph.items():
        if module != "cost_models":
            assert "cost_models" not in deps, f"{module} imports the package"
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            assert state.get(d) != 1, f"import cycle: {' -> '.join([*path, d])}"
            if d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
