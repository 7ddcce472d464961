"""Issue 27: every plan the search ranks can be placed. Random allocations (uneven leaves, one
to three pods behind 3:1 / 7:1 uplinks, drained hosts) x dense / MoE / MLA / CP / uneven-PP
plans x every framework: the answer is a placement or "no feasible plan" (exit 0 or 1), never
an input error (exit 2); the placed map uses every GPU once, is no worse than both baselines,
and re-prices (estimate with its spans and uplink steps) to CP-SAT's reported objective.

A framework that refuses the request itself (DeepSpeed and MoE layers or CP, as its profile
says) is bad input by the CLI contract, so the cases draw only requests the framework's profile
accepts; those refusals are tested in test_framework_profiles.py.
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import models_zoo
from cost_models.errors import NoFeasiblePlan
from cost_models.specs import Cluster, LinkTier
from planner.convenience import plan_on_allocation_for
from planner.cli import main
from planner.place import model as M
from planner.place import pricing
from planner.place.allocation import synthetic

GPN = 8


def fat_tree(num_gpus: int) -> Cluster:
    """Three tiers above NVLink: 4-node leaves (1:1), pods behind 3:1, the core behind 7:1."""
    return Cluster(
        name="fat-tree-test",
        gpu=models_zoo.load_gpu("h100-sxm-80gb"),
        gpus_per_node=GPN,
        num_gpus=num_gpus,
        tiers=(
            LinkTier(name="nvlink", domain_size=8, bandwidth_gb_per_s=450, latency_us=3.0,
                     kind="nvlink"),
            LinkTier(name="leaf", domain_size=4 * GPN, bandwidth_gb_per_s=50, latency_us=5.0),
            LinkTier(name="spine", domain_size=16 * GPN, bandwidth_gb_per_s=50, latency_us=7.0,
                     oversubscription=3.0),
            LinkTier(name="core", domain_size=None, bandwidth_gb_per_s=50, latency_us=10.0,
                     oversubscription=7.0),
        ),
    )  # fmt: skip


def small_mla():
    """DeepSeek-V3's MLA and MoE shapes, shrunk to fit a few nodes."""
    spec = models_zoo.load_model("deepseek-v3")
    moe = spec.moe.model_copy(
        update={"num_experts": 32, "first_k_dense_layers": 1, "expert_ffn_hidden_size": 1024}
    )
    update = {"name": "mla-small", "num_layers": 7, "hidden_size": 2048, "moe": moe}
    return spec.model_copy(update={**update, "num_attention_heads": 16, "num_kv_heads": 16})


# kind -> (model, pins, frameworks whose profile accepts the request)
PLANS = {
    "dense": ("llama3-8b", {}, ("megatron", "torchtitan", "deepspeed")),
    "moe": ("qwen3-30b-a3b", {}, ("megatron", "torchtitan")),
    "mla": ("mla", {}, ("megatron", "torchtitan")),
    "cp": ("llama3-8b", {"cp": 2}, ("megatron", "torchtitan")),
    "uneven_pp": ("llama3-8b", {"pp": 3}, ("megatron", "torchtitan", "deepspeed")),
}
CASES = [(kind, fw) for kind, (_, _, fws) in PLANS.items() for fw in fws]


def random_allocation(rng: random.Random, multiple: int):
    """Leaves of 1-5 hosts over 1-3 pods, up to a sixth drained; the GPU count asked is the
    largest `multiple` x 2^k the healthy hosts hold (degrees that divide it exist)."""
    hosts, leaf, pod = [], {}, {}
    n_leaves, pods = rng.randint(2, 6), rng.randint(1, 3)
    for i in range(n_leaves):
        for k in range(rng.randint(1, 5)):
            h = f"h{i:02d}{k:02d}"
            hosts.append(h)
            leaf[h], pod[h] = f"leaf{i}", f"pod{min(pods - 1, i * pods // n_leaves)}"
    drained = set(rng.sample(hosts, rng.randint(0, len(hosts) // 6)))
    healthy = [h for h in hosts if h not in drained]
    while len(healthy) * GPN < multiple:
        healthy.append(f"x{len(healthy):03d}")
        leaf[healthy[-1]], pod[healthy[-1]] = f"leaf{n_leaves}", "pod0"
    cluster = fat_tree(len(healthy) * GPN)
    levels = [{h: leaf[h] for h in healthy}, {h: pod[h] for h in healthy}]
    gpus = multiple
    while 2 * gpus <= len(healthy) * GPN:
        gpus *= 2
    return cluster, synthetic(cluster, healthy, levels), gpus


def check_placement(model, cluster, alloc, placed) -> None:
    """The invariants of one placed layout."""
    for p in placed.placements:
        work = p.workload
        hosts = Counter(p.host_of_rank.tolist())
        assert max(hosts.values()) <= GPN  # every GPU at most once
        assert p.placed.step_time_s <= min(p.scheduler.step_time_s, p.best_order.step_time_s)
        again = pricing.price(model, cluster, work, p.placed.layout, alloc, p.host_of_rank)
        assert again.step_time_s == pytest.approx(p.placed.step_time_s, abs=1e-9)
        if p.solver["status"] in ("OPTIMAL", "FEASIBLE"):
            um = M.unit_model(model, cluster, work, p.ideal.layout, alloc)
            # The kept map is no dearer than CP-SAT's objective (which, with split blocks, is an
            # upper bound on its map's price); without split blocks CP-SAT's map re-prices to it.
            assert p.placed.step_time_s <= p.solver["objective"] + 2e-6
            if p.source == "cp-sat" and not um.split_blocks:
                assert p.placed.step_time_s == pytest.approx(p.solver["objective"], abs=2e-6)


def run_case(case_seed: int) -> str:
    rng = random.Random(case_seed)
    kind, fw = CASES[case_seed % len(CASES)]
    name, pins, _ = PLANS[kind]
    model = small_mla() if name == "mla" else models_zoo.load_model(name)
    cluster, alloc, gpus = random_allocation(rng, 3 * GPN if kind == "uneven_pp" else GPN)
    try:
        placed = plan_on_allocation_for(
            model, cluster, topology=alloc, num_gpus=gpus, global_batch=rng.choice((32, 64)),
            seq_len=2048, framework=fw, place_top=2, **pins,
        )  # fmt: skip
    except NoFeasiblePlan:
        return "1"
    check_placement(placed.ideal.model, placed.ideal.cluster, alloc, placed)
    return "0"


@pytest.mark.parametrize("case_seed", range(len(CASES)))
def test_each_plan_kind_and_framework_places(case_seed):
    """One case per (plan kind, framework) in the default suite."""
    assert run_case(case_seed) in ("0", "1")


@pytest.mark.parametrize("case_seed", [36220, 118993746])
def test_found_by_the_property_run(case_seed):
    """Seeds the slow run found: 36220 (Qwen3-30B-A3B on leaves of at most 3 hosts: every
    4-node EP block is a split block, no leaf holds a whole one; the DP table had no key, a
    traceback); 118993746 (mla-small on torchtitan, HSDP 2 x 16: the tables served an entry
    priced at spine step 0 for step 4, since only the dp / dp_cp / edp spans were checked for
    crossing the spine, not HSDP's dp_shard / dp_replicate; CP-SAT's objective 35.27 ms vs
    36.37 ms re-priced)."""
    assert run_case(case_seed) == "0"


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("PLANNER_SLOW"),
    reason="80 random cases, minutes: "
    "PLANNER_SLOW=1 pytest tests/integration/place/test_place_property.py",
)
@seed(27)
@settings(
    max_examples=80, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck),
)  # fmt: skip
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_random_allocations_and_plans_always_place(case_seed):
    assert run_case(case_seed) in ("0", "1")


TOPOLOGY = """\
SwitchName=leaf0 Nodes=gpu[001-004]
SwitchName=leaf1 Nodes=gpu[005-008]
SwitchName=leaf2 Nodes=gpu[009-012]
SwitchName=leaf3 Nodes=gpu[013-016]
SwitchName=leaf4 Nodes=gpu[017-020]
SwitchName=pod0 Switches=leaf[0-2]
SwitchName=pod1 Switches=leaf[3-4]
SwitchName=core Switches=pod[0-1]
"""


def test_moe_ep_plan_on_a_drained_tapered_tree_places(tmp_path, capsys):
    """The issue's reproduction in small: an MoE model with an EP plan on a three-tier tapered
    tree with drained hosts exited 2 (the best-rank-order baseline tried tp-cp-pp-dp, which
    Megatron-Core refuses for this plan); now it places (exit 0), no worse than both baselines."""
    import json

    (tmp_path / "topology.conf").write_text(TOPOLOGY)
    (tmp_path / "hosts").write_text("".join(f"gpu{i:03d}\n" for i in range(1, 21)))
    cluster = fat_tree(160).model_dump_json()
    (tmp_path / "cluster.json").write_text(cluster)
    argv = ["plan", "--model", "qwen3-30b-a3b", "--cluster", str(tmp_path / "cluster.json"),
            "--gpus", "128", "--global-batch", "64", "--seq-len", "2048", "--ep", "8", "--pp", "2",
            "--topology", str(tmp_path / "topology.conf"), "--hosts", str(tmp_path / "hosts"),
            "--exclude", "gpu003,gpu010", "--place-top", "1", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    steps = out["allocation"]["step_time_s"]
    assert steps["placed"] <= min(steps["scheduler_order"], steps["best_rank_order"])
