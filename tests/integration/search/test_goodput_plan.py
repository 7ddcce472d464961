"""plan() with goodput: figures per plan, --objective goodput and its proof rule, the reliability file."""

from __future__ import annotations

import math

import pytest

from cost_models import goodput as G
from cost_models.errors import InvalidInput
from planner import api, convenience
from planner.reliability import load_reliability
from planner.search import goodput_rank
from tests import factories as F

# An unreliable fleet (ten times Llama 3's failure rates) checkpointing over a slow shared
# file system (0.25 GB/s per node), with DeepSpeed's save: the first data-parallel replica
# alone writes the model states (engine.save_checkpoint's mp_rank_* files), every rank its
# ZeRO optimizer shard.
SLOW = G.Reliability(save_strategy="first_replica", node_storage_gb_per_s=0.25, mtbf_scale=0.1)


def problem():
    # 512 sequences over 64 GPUs: enough micro-batches that the step-time plan keeps ZeRO-2
    # (with 64, DeepSpeed's in-step parameter gather, stage_1_and_2.py step ->
    # all_gather_dp_groups, exposed once per step, makes ZeRO-3 the fastest plan outright).
    return F.dense_model(), F.cluster(num_gpus=64), F.workload(global_batch=512)


def plan(objective: str):
    space, options = convenience.search_inputs("deepspeed", top_k=3, objective=objective)
    return api.plan(*problem(), space, options, SLOW)


def test_goodput_objective_changes_the_plan_for_its_checkpoint_shard():
    by_time, by_goodput = plan("step_time"), plan("goodput")
    fast, fast_g = by_time.ranked[0], by_time.goodput[0]
    good, good_g = by_goodput.ranked[0], by_goodput.goodput[0]
    # Step time: TP 1 x DP 64 (ZeRO-2, micro-batch 2), 9,271 tokens/s/GPU (NCCL's flat ring,
    # issue 33; the DP edge buckets exposed, stage.dp_edge_buckets_s; FlashAttention-2, the
    # deepspeed profile's --use-flash-attn-v2; DeepSpeed's bf16 gradients reduced every
    # micro-batch, flattened and cast to fp32 at the step, memory.step_cast; the updated
    # parameters gathered inside the step, exposed); its first replica writes the whole bf16
    # model plus a 64th of the fp32 optimizer: 17.57 GB per rank, 8 ranks per node at
    # 0.25 GB/s: 562 s per checkpoint; ETTR 0.936 -> 8,675 goodput.
    assert (fast.layout.tp, fast.layout.dp, fast.layout.zero_stage) == (1, 64, 2)
    assert fast.tokens_per_s_per_gpu == pytest.approx(9270.9, abs=0.1)
    assert fast_g.checkpoint_rank_gb == pytest.approx(17.57, abs=0.01)
    assert fast_g.checkpoint_write_s == pytest.approx(fast_g.checkpoint_rank_gb * 8 / 0.25)
    assert fast_g.ettr == pytest.approx(0.9357, abs=1e-4)
    # Goodput: the same TP 1 x DP 64 under ZeRO-3 shards the model states too (1.51 GB per
    # rank, 48 s), 2.3 % slower per step (a gather per fetch before every forward and backward;
    # the last 5e8 elements and one module stay gathered into the backward, DeepSpeed's
    # stage3_max_reuse_distance) but ETTR 0.980: 8,875 goodput tokens/s/GPU, the best (proved);
    # TP 2 under ZeRO-1 (9.54 GB, ETTR 0.952) reaches 8,546.
    assert (good.layout.tp, good.layout.dp, good.layout.zero_stage) == (1, 64, 3)
    assert good.tokens_per_s_per_gpu < fast.tokens_per_s_per_gpu
    assert good_g.checkpoint_rank_gb == pytest.approx(1.51, abs=0.01)
    assert good_g.ettr == pytest.approx(0.9795, abs=1e-4)
    assert good_g.goodput_tokens_per_s_per_gpu == pytest.approx(8875.1, abs=0.1)
    ranked = zip(by_time.ranked, by_time.goodput, strict=True)
    zero1 = [g for e, g in ranked if (e.layout.tp, e.layout.zero_stage) == (2, 1)]
    assert zero1 and zero1[0].checkpoint_rank_gb == pytest.approx(9.54, abs=0.01)
    assert zero1[0].goodput_tokens_per_s_per_gpu < good_g.goodput_tokens_per_s_per_gpu
    assert good_g.goodput_tokens_per_s_per_gpu > fast_g.goodput_tokens_per_s_per_gpu
    assert by_goodput.solver.status == "PROVED"
    assert by_goodput.solver.objective_unit == "goodput_tokens_per_s_per_gpu"
    assert by_goodput.solver.objective == by_goodput.solver.best_bound
    assert [g.goodput_tokens_per_s_per_gpu for g in by_goodput.goodput] == sorted(
        (g.goodput_tokens_per_s_per_gpu for g in by_goodput.goodput), reverse=True
    )


def test_default_reliability_keeps_the_fast_plan():
    # With balanced saves and Llama 3 rates the same problem keeps its step-time plan.
    space, by_goodput = convenience.search_inputs("deepspeed", top_k=3, objective="goodput")
    a = api.plan(*problem(), space, by_goodput)
    b = api.plan(*problem(), space, by_goodput.model_copy(update={"objective": "step_time"}))
    lo_a, lo_b = a.ranked[0].layout, b.ranked[0].layout
    assert (lo_a.tp, lo_a.dp, lo_a.zero_stage) == (lo_b.tp, lo_b.dp, lo_b.zero_stage) == (1, 64, 2)
    assert b.goodput == ()


def real_estimate():
    m, c, w = F.dense_model(), F.cluster(num_gpus=64), F.workload(global_batch=64)
    return api.estimate(m, c, api.layout_with_defaults({"tp": 2, "dp": 32}), w)


def fake(e, tokens):
    return e.model_copy(update={"tokens_per_s_per_gpu": tokens, "step_time_s": 1000 / tokens})


def test_proof_rule_grows_k_until_the_bound_is_below_the_kth_goodput():
    e = real_estimate()
    # 10 plans, 100 .. 91 tokens/s/GPU; goodput = tokens x ETTR where only plan 5 has ETTR 1.
    plans = [fake(e, 100.0 - i) for i in range(10)]
    ettr = {id(p): (1.0 if i == 5 else 0.5) for i, p in enumerate(plans)}
    calls = []

    def search(k):
        calls.append(k)
        return plans[:k], stats(), {}

    def stats():
        from planner.types import SolveStats

        return SolveStats(engine="exhaustive", status="PROVED", objective=1.0, best_bound=1.0,
                          gap=0.0, wall_time_s=0.0, num_candidates=10, num_scored=10,
                          num_feasible=10)

    def score(p):
        return G.Goodput.model_construct(goodput_tokens_per_s_per_gpu=p.tokens_per_s_per_gpu
                                         * ettr[id(p)])

    # U = 1: with K = 4 the unranked bound (~97) beats the best ranked goodput (50): grow to 16
    # (all 10 ranked: nothing left unranked), then plan 5 (95) leads, proved.
    r = goodput_rank.rank_by_goodput(search, score, 1.0, 1, math.inf)
    assert calls == [4, 16]
    assert r.ranked[0].tokens_per_s_per_gpu == 95.0
    assert r.stats.status == "PROVED" and r.stats.best_bound == r.stats.objective == 95.0
    # A tighter U (0.5) proves the first answer at once: 0.5 x 97 < 50.
    calls.clear()
    r = goodput_rank.rank_by_goodput(search, score, 0.5, 1, math.inf)
    assert calls == [4]
    assert r.stats.status == "PROVED"
    # Out of time before a proof: STOPPED, the bound above the objective.
    calls.clear()
    r = goodput_rank.rank_by_goodput(search, score, 1.0, 1, -math.inf)
    assert r.stats.status == "STOPPED"
    assert r.stats.best_bound > r.stats.objective == 50.0


def test_reliability_file_overrides_part_of_a_component(tmp_path):
    f = tmp_path / "rel.yaml"
    f.write_text("components:\n  gpu: {per_unit_per_day: 1.0e-4}\nspare_nodes: 2\n")
    rel = load_reliability(f)
    assert rel.components["gpu"].per_unit_per_day == 1.0e-4
    assert rel.components["gpu"].unit == "gpu" and rel.components["gpu"].hardware
    assert rel.components["hbm"] == G.Reliability().components["hbm"]
    assert rel.spare_nodes == 2


@pytest.mark.parametrize(
    "text, needle",
    [
        ("restart_s: -5\n", "restart_s"),
        ("checkpoint: sometimes\n", "checkpoint"),
        ("components:\n  gpu: {per_unit_per_day: -1}\n", "components.gpu.per_unit_per_day"),
        ("straggler_factors: [1.0, 0.5]\n", "straggler_factors"),
        # issue 28 fuzz (seed 401 case 480): a 9.2e18 factor overflowed Daly's e^x (traceback)
        ("straggler_factors: [9223372036854775808, 1.02]\n", "at most 101"),
        ("storage_gb_per_s: .nan\n", "storage_gb_per_s"),
        ("mtbf: 3\n", "unknown field"),
        ("- 1\n", "expected a mapping"),
    ],
)
def test_bad_reliability_values_are_one_line_errors(tmp_path, text, needle):
    f = tmp_path / "rel.yaml"
    f.write_text(text)
    with pytest.raises(InvalidInput) as err:
        load_reliability(f)
    msg = str(err.value)
    assert needle in msg and str(f) in msg and "\n" not in msg


def test_straggler_table_file(tmp_path):
    (tmp_path / "gpus.csv").write_text("gpu,factor\n0,1.0\n1,1.0\n2,1.3\n")
    (tmp_path / "rel.yaml").write_text("straggler_table: gpus.csv\n")
    rel = load_reliability(tmp_path / "rel.yaml")
    assert rel.straggler_factors == (1.0, 1.0, 1.3)
    (tmp_path / "bad.csv").write_text("factor\n0.9\n")
    (tmp_path / "rel2.yaml").write_text("straggler_table: bad.csv\n")
    with pytest.raises(InvalidInput, match="row 1: factor: must be a finite number >= 1"):
        load_reliability(tmp_path / "rel2.yaml")


CONTRACT_KEYS = [
    "interruptions_per_day", "checkpoint_interval_s", "checkpoint_write_s", "restart_s", "ettr",
    "goodput_tokens_per_s_per_gpu",
]


def run_cli(capsys, *argv):
    import json

    from planner.cli import main

    rc = main(list(argv))
    out = capsys.readouterr().out
    return rc, (json.loads(out) if "--json" in argv and rc == 0 else out)


def test_llama3_405b_record_with_the_defaults(capsys):
    # Llama 3 (arXiv 2407.21783 sec. 3.3.4): 466 interruptions in 54 days on 16,384 H100
    # (8.63 per day) and more than 90 % effective training time (docs/goodput.md).
    rc, out = run_cli(
        capsys, "estimate", "--model", "llama3.1-405b", "--cluster", "llama3-roce-24k",
        "--gpus", "16384", "--tp", "8", "--pp", "16", "--dp", "128", "--global-batch", "2048",
        "--seq-len", "8192", "--zero", "1", "--goodput", "--json",
    )
    assert rc == 0
    g = out["goodput"]
    assert list(g)[:6] == CONTRACT_KEYS
    assert g["interruptions_per_day"] == pytest.approx(466 / 54)
    assert 0.90 < g["ettr"] < 0.92  # the docs' derivation: 0.908
    assert g["checkpoint_write_s"] == pytest.approx(5681.9 / 2000, abs=0.01)
    assert g["restart_s"] == pytest.approx(740.7, abs=0.1)


def test_plan_cli_goodput_objective_and_reports(capsys, tmp_path):
    rel = tmp_path / "rel.yaml"
    rel.write_text("save_strategy: first_replica\nnode_storage_gb_per_s: 0.25\nmtbf_scale: 0.1\n")
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64",
            "--global-batch", "256", "--seq-len", "4096", "--top", "2", "--framework", "deepspeed"]
    rc, out = run_cli(capsys, *base, "--objective", "goodput", "--reliability", str(rel), "--json")
    assert rc == 0
    assert out["solver"]["objective_unit"] == "goodput_tokens_per_s_per_gpu"
    goods = [p["goodput"]["goodput_tokens_per_s_per_gpu"] for p in out["ranked"]]
    assert goods == sorted(goods, reverse=True)
    assert out["solver"]["objective"] == pytest.approx(goods[0])
    rc, text = run_cli(capsys, *base, "--goodput", "--markdown")
    assert rc == 0 and "## Goodput" in text and "ETTR" in text
    rc, text = run_cli(capsys, *base)
    assert rc == 0 and "goodput" not in text.lower()


def test_bad_reliability_file_exits_2(capsys, tmp_path):
    from planner.cli import main

    bad = tmp_path / "rel.yaml"
    bad.write_text("node_storage_gb_per_s: 0\n")
    rc = main(["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64",
               "--reliability", str(bad)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "node_storage_gb_per_s" in err and len(err.strip().splitlines()) == 1


def test_whatif_spares_prices_kept_tokens_and_spare_gpus():
    from planner.whatif_goodput import whatif_reliability

    r = whatif_reliability(
        "llama3-8b", "dgx-h100", "spares", [0, 2], num_gpus=64, gpu_hour_price=2.0,
        global_batch=128, time_limit_s=20,
    )
    base, none, two = r.baseline, r.points[0], r.points[1]
    assert none.goodput == base.goodput and none.change == 0.0
    g = two.goodput
    assert g.spare_gpus == 16
    # $ per million kept tokens: $2 / (goodput x 3,600 s) x 1e6, goodput already per paid GPU.
    assert two.cost_per_m_tokens == pytest.approx(2.0 / (g.goodput_tokens_per_s_per_gpu * 3600) * 1e6)
    assert g.goodput_tokens_per_s_per_gpu == pytest.approx(
        g.tokens_per_s_per_gpu * g.ettr * 64 / 80
    )
    # Two spares cut the replacement wait but cost 16 of 80 GPUs: not worth it at 64 GPUs.
    assert g.restart_s < base.goodput.restart_s
    assert two.cost_per_m_tokens > base.cost_per_m_tokens
    assert two.change == pytest.approx(
        g.goodput_tokens_per_s_per_gpu / base.goodput.goodput_tokens_per_s_per_gpu - 1
    )


def test_whatif_reliability_names_a_search_the_time_limit_cut(monkeypatch):
    """Issue 28 fuzz (seed 409 case 216): a reliability whatif whose 1 s searches the time limit
    cut printed other plans on a second run without a word (the network whatif already said
    STOPPED). The hard margin is widened so that a loaded machine still scores a first plan."""
    from planner.report.whatif_view import conclusions
    from planner.search import table
    from planner.whatif_goodput import whatif_reliability

    monkeypatch.setattr(table, "HARD_MARGIN_S", 600.0)
    r = whatif_reliability(
        "llama3-8b", "dgx-h100", "mtbf", [2], num_gpus=64, global_batch=128, time_limit_s=1e-9
    )
    assert r.stopped == (True, True)
    warning = [c for c in conclusions(r) if c.startswith("Warning: the search at baseline, 2 ")]
    assert warning and "(STOPPED)" in warning[0]


@pytest.mark.parametrize(
    "parameter, value, needle",
    [("spares", 1.5, "whole numbers"), ("mtbf", 0.0, "> 0"), ("storage-gb-per-s", -1.0, "> 0")],
)
def test_whatif_reliability_bad_values(parameter, value, needle):
    from planner.whatif_goodput import vary_reliability

    with pytest.raises(InvalidInput, match=needle):
        vary_reliability(G.Reliability(), parameter, value)


def test_vary_mtbf_scales_every_rate():
    from planner.whatif_goodput import vary_reliability

    c = F.cluster(num_gpus=64)
    base = G.interruptions(G.Reliability(), c)
    twice = G.interruptions(vary_reliability(G.Reliability(), "mtbf", 2.0), c)
    assert twice.unexpected_per_day == pytest.approx(base.unexpected_per_day / 2)
    assert twice.planned_per_day == base.planned_per_day  # maintenance is not a failure


def test_reliability_sweep_conclusion_names_the_cheapest_kept_token():
    from planner.report.goodput_view import goodput_conclusions

    def g(good, ettr):
        return G.Goodput.model_construct(goodput_tokens_per_s_per_gpu=good, ettr=ettr)

    rows = [("baseline", g(100.0, 0.90), 0.50), ("2", g(110.0, 0.99), 0.45), ("4", g(111.0, 0.995), 0.47)]
    assert goodput_conclusions(rows) == [
        "Cheapest per kept token: 2 at $0.450/M (baseline $0.500/M), ETTR 99.0% vs 90.0%."
    ]
    assert goodput_conclusions(rows[:1]) == [
        "No value beats the baseline's $0.500 per million kept tokens."
    ]
    unpriced = [(label, x, None) for label, x, _ in rows]
    assert goodput_conclusions(unpriced) == [
        "Most goodput: 4 at 111.0 tokens/s/GPU (baseline 100.0), ETTR 99.5% vs 90.0%."
    ]
