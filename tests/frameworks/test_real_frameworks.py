"""The exports fed to the real frameworks (issue 15), one process playing rank 0 of the world.

Runs in its own environment (tests/frameworks/requirements.txt: megatron-core 0.19.2, torchtitan
0.3.0, DeepSpeed 0.19.8, Python >= 3.12), created by .ci/run. The default suite skips it (the
frameworks are not importable there).

Each plan's exports go through the frameworks' own code paths under torch's `fake` process-group
backend (torch.testing._internal.distributed.fake_pg: collectives do nothing, groups are real):
- Megatron-LM: megatron.training.arguments.parse_args + validate_args, then
  megatron.core.parallel_state.initialize_model_parallel with the order the training script
  picks (megatron/training/initialize.py); the TP/CP/DP/PP/EP groups it builds (its
  RankGenerator, and rank 0's process groups) must equal the planner's (planner/place/ranks.py);
- torchtitan 0.3.0: torchtitan.config.manager.ConfigManager.parse_args of the release command
  line, then ParallelDims.from_config(...).build_mesh(); the mesh's tp/cp/pp/batch groups must
  equal the planner's;
- DeepSpeed 0.19.8: deepspeed.runtime.config.DeepSpeedConfig of the JSON with the mpu that
  Megatron-DeepSpeed passes (deepspeed.runtime.pipe.topology.PipelineParallelGrid on
  PipeModelDataParallelTopology), whose groups must equal the planner's;
- torch: init_device_mesh of planner's DeviceMesh export.

Stubs (only what needs a GPU):
- torch.cuda.current_device / device_count: Megatron's validate_args and parallel_state read
  the device for NCCL options; with no GPU they raise. Replaced by constants (0 / 8).
- megatron.training.arguments.get_device_arch_version: reads cuda:0's compute capability;
  returns 9 (Hopper, the GPUs of the test cluster).
- CUDA_DEVICE_MAX_CONNECTIONS is unset: Megatron-FSDP asserts it is not "1" (a GPU launch sets it).
"""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path

import pytest

megatron = pytest.importorskip("megatron.core", reason="real frameworks not installed (.ci/run)")
torchtitan = pytest.importorskip("torchtitan", reason="real frameworks not installed (.ci/run)")
deepspeed = pytest.importorskip("deepspeed", reason="real frameworks not installed (.ci/run)")

import numpy as np
import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import factories as f

import planner
from cost_models import framework, memory
from cost_models.errors import InvalidInput
from cost_models.specs import Axis, Layout
from planner.export import launch, plan_exports
from planner.place import ranks
from planner.types import PlanResult

TCDP = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)
TCPD = (Axis.TP, Axis.CP, Axis.PP, Axis.DP)

# name -> (model, gpus, workload, layout fields)
PLANS = {
    "dense": (f.dense_model(), 16, f.workload(global_batch=32), {"tp": 2, "dp": 8}),
    "dense-pp-dp-order": (
        f.dense_model(),
        16,
        f.workload(global_batch=32),
        {"tp": 2, "pp": 2, "dp": 4, "order": TCPD},
    ),
    "interleaved-even": (
        f.dense_model(),
        32,
        f.workload(global_batch=64),
        {"tp": 4, "pp": 2, "dp": 4, "vp": 4, "sequence_parallel": True},
    ),
    "interleaved-uneven": (
        f.dense_model(num_layers=30),
        32,
        f.workload(global_batch=64),
        {"tp": 4, "pp": 4, "dp": 2, "vp": 2, "zero_stage": 2},
    ),
    "uneven-first-last": (
        f.dense_model(num_layers=30),
        32,
        f.workload(global_batch=64),
        {"tp": 4, "pp": 4, "dp": 2, "recompute": "selective", "zero_stage": 0},
    ),
    "cp": (f.dense_model(), 16, f.workload(global_batch=32), {"tp": 2, "cp": 2, "dp": 4}),
    "moe-ep": (f.moe_model(), 16, f.workload(global_batch=32), {"tp": 2, "dp": 8, "ep": 4}),
    # fp8 experts with the routing map padded to the quantization alignment
    # (--moe-router-padding-for-quantization: Workload.moe_router_padding)
    "moe-ep-fp8-router-padding": (
        f.moe_model(),
        16,
        f.workload(global_batch=32, precision="fp8", moe_router_padding=True),
        {"tp": 2, "dp": 8, "ep": 4},
    ),
    # token-drop MoE padded to capacity (--moe-expert-capacity-factor,
    # --moe-pad-expert-input-to-capacity: Workload.moe_capacity_factor / moe_pad_to_capacity)
    "moe-ep-fp8-token-drop": (
        f.moe_model(),
        16,
        f.workload(
            global_batch=32, precision="fp8", moe_capacity_factor=1.0, moe_pad_to_capacity=True
        ),
        {"tp": 2, "dp": 8, "ep": 4},
    ),
    "zero3-fsdp": (
        f.dense_model(),
        16,
        f.workload(global_batch=64),
        {"tp": 2, "dp": 8, "zero_stage": 3, "recompute": "full"},
    ),
    "hsdp": (
        f.dense_model(),
        32,
        f.workload(global_batch=64),
        {"tp": 2, "dp": 16, "zero_stage": 3, "dp_shard": 4},
    ),
    # HSDP with EP: the experts on their own (dp_replicate, efsdp) mesh, efsdp = 4*2 / 4 = 2
    "hsdp-moe-ep": (
        f.moe_model(),
        32,
        f.workload(global_batch=64),
        {"tp": 2, "dp": 16, "ep": 4, "zero_stage": 3, "dp_shard": 4, "sequence_parallel": True},
    ),
    "fp8": (
        f.dense_model(),
        16,
        f.workload(global_batch=32, precision="fp8"),
        {"tp": 4, "dp": 4},
    ),
    # bf16 Adam moments: --use-precision-aware-optimizer --exp-avg(-sq)-dtype bf16 (ZeRO-1)
    "bf16-moments": (
        f.dense_model(),
        16,
        f.workload(global_batch=32, optimizer_moments="bf16"),
        {"tp": 2, "dp": 8, "zero_stage": 1},
    ),
    # The MoE all-to-all overlap on an fp8 (bf16 + TE fp8) model, as Megatron-Bridge's GB300
    # DeepSeek-V3 recipe runs it.
    "moe-ep-overlap-fp8": (
        f.moe_model(),
        32,
        f.workload(global_batch=64, precision="fp8"),
        {"tp": 2, "pp": 2, "vp": 2, "dp": 8, "ep": 4, "ep_overlap": True},
    ),
}


def plan_result(name: str, profile: framework.FrameworkProfile | None = None) -> PlanResult:
    """PLANS[name] scored; with `profile`, its workload takes that framework's physics (the
    attention kernel a deepspeed plan launches, ...), as a plan searched for it does."""
    model, gpus, workload, fields = PLANS[name]
    if profile is not None:
        workload = profile.workload(workload)
    return f.result_for(model, f.cluster(gpus), workload, Layout(**fields))


@pytest.fixture
def fake_world(monkeypatch):
    """A `fake` process group of the plan's world size, this process rank 0."""
    worlds = []

    def start(world_size: int) -> None:
        monkeypatch.setenv("WORLD_SIZE", str(world_size))
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("LOCAL_RANK", "0")
        monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
        # Stub: no GPU here; Megatron reads the current device for its NCCL options.
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        # Stub: Hopper (validate_args checks the capability for --moe-grouped-gemm).
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
        worlds.append(world_size)

    yield start
    if dist.is_initialized():
        from megatron.core import parallel_state

        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()


def groups_of(result: PlanResult) -> dict[str, list[list[int]]]:
    return {k: sorted(sorted(g) for g in v) for k, v in plan_exports.to_rank_groups(result).items()}


def _sorted(groups) -> list[list[int]]:
    return sorted(sorted(int(r) for r in g) for g in groups)


# ------------------------------------------------------------------------------------ Megatron


SEARCHED = [
    # (model preset, GPUs, pins): plans searched for each framework, the top 3 checked
    ("llama3-8b", 16, {}),
    ("mixtral-8x7b", 32, {"tp": 2}),
    ("llama3-70b", 64, {"tp": 8}),
]
_searched: dict = {}


def searched(name: str, case: int) -> PlanResult:
    key = (name, case)
    if key not in _searched:
        model, gpus, pins = SEARCHED[case]
        if name == "torchtitan":  # its llama3 recipes are Llama 3.1 (same shapes, rope scaling)
            model = model.replace("llama3-", "llama3.1-")
        _searched[key] = planner.plan_for(model, "dgx-h100", num_gpus=gpus, top_k=3, framework=name, **pins)
    return _searched[key]


MEGATRON_PLANS = [n for n in PLANS if "dp_shard" not in PLANS[n][3]]  # HSDP is torchtitan's


@pytest.mark.parametrize("name", MEGATRON_PLANS)
def test_megatron_accepts_and_builds_the_same_groups(name, fake_world, monkeypatch):
    check_megatron(plan_result(name), 0, fake_world, monkeypatch)


@pytest.mark.parametrize("case", range(len(SEARCHED)))
@pytest.mark.parametrize("index", range(3))
def test_megatron_runs_the_plans_searched_for_it(case, index, fake_world, monkeypatch):
    check_megatron(searched("megatron", case), index, fake_world, monkeypatch)


def check_megatron(result: PlanResult, index: int, fake_world, monkeypatch):
    from megatron.core import parallel_state
    from megatron.training import arguments
    from megatron.training.arguments import parse_args, validate_args

    monkeypatch.setattr(arguments, "get_device_arch_version", lambda: 9)  # stub: no GPU
    result = result.model_copy(update={"ranked": (result.ranked[index],)})
    lo = result.best.layout
    args = plan_exports.to_megatron_args(result)
    if "--delay-wgrad-compute" in args and "--overlap-grad-reduce" in args:
        # stub: Transformer Engine is not installed here; validate_args asks it for >= 2.8 for
        # this pair (the containers that run megatron-core 0.19 with EP overlap ship it)
        monkeypatch.setattr(arguments, "is_te_min_version", lambda *a, **k: True)
    fake_world(lo.world_size)
    for key, value in launch.megatron_env(result.best).items():
        monkeypatch.setenv(key, value)
    # Required by pretrain_gpt.py but not part of the plan: a tokenizer and data source.
    extra = ["--tokenizer-type", "NullTokenizer", "--mock-data", "--lr", "1e-4"]
    extra += ["--train-iters", "10"]
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *args, *extra])
    ns = parse_args()
    validate_args(ns)
    # the DP overlap and the fused loss the cost model prices (both off by default in Megatron)
    # a DP x CP group, or a MoE's expert data-parallel group (TP x CP x DP / (EP x ETP) ranks)
    moe = result.model.moe is not None
    reduced = lo.dp * lo.cp > 1 or (moe and lo.tp * lo.cp * lo.dp > lo.ep * lo.etp)
    assert ns.overlap_grad_reduce == reduced
    assert ns.overlap_param_gather == (reduced and lo.zero_stage >= 1)
    assert ns.cross_entropy_loss_fusion
    assert ns.tensor_model_parallel_size == lo.tp
    assert ns.pipeline_model_parallel_size == lo.pp
    assert ns.context_parallel_size == lo.cp
    assert ns.data_parallel_size == lo.dp
    assert (ns.virtual_pipeline_model_parallel_size or 1) == lo.vp
    order = "tp-cp-ep-pp-dp" if ns.use_tp_pp_dp_mapping else "tp-cp-ep-dp-pp"
    parallel_state.initialize_model_parallel(
        ns.tensor_model_parallel_size,
        ns.pipeline_model_parallel_size,
        ns.virtual_pipeline_model_parallel_size,
        context_parallel_size=ns.context_parallel_size,
        expert_model_parallel_size=ns.expert_model_parallel_size,
        expert_tensor_parallel_size=ns.expert_tensor_parallel_size,
        order=order,
        create_gloo_process_groups=False,
    )
    ours = groups_of(result)
    gen = parallel_state.RankGenerator(
        tp=lo.tp, ep=1, dp=lo.dp, pp=lo.pp, cp=lo.cp, order=order, rank_offset=0
    )
    for axis in ("tp", "cp", "dp", "pp"):
        assert _sorted(gen.get_ranks(axis)) == ours[axis], axis
    # Rank 0's own process groups, as initialize_model_parallel created them.
    mine = {
        "tp": parallel_state.get_tensor_model_parallel_group(),
        "pp": parallel_state.get_pipeline_model_parallel_group(),
        "dp": parallel_state.get_data_parallel_group(),
        "cp": parallel_state.get_context_parallel_group(),
    }
    for axis, group in mine.items():
        expected = next(g for g in ours[axis] if 0 in g)
        assert sorted(dist.get_process_group_ranks(group)) == expected, axis
    if result.model.moe is not None:
        ep = parallel_state.get_expert_model_parallel_group()
        expected = next(g for g in ours["ep"] if 0 in g)
        assert sorted(dist.get_process_group_ranks(ep)) == expected
    return ns


# The memory inputs of issue 32 (bf16 main gradients, fp8 primary weights, CPU activation
# offloading), alone and together: name -> (workload, layout fields, what Megatron parsed).
MEMORY_INPUTS = {
    "bf16-grads": (
        f.workload(global_batch=32, main_grads="bf16"),
        {"tp": 2, "dp": 8},
        {"grad_reduce_in_bf16": True, "accumulate_allreduce_grads_in_fp32": False},
    ),
    "fp8-params": (
        f.workload(global_batch=32, precision="fp8", fp8_params=True),
        {"tp": 2, "dp": 8},
        {"fp8_param_gather": True, "use_distributed_optimizer": True},
    ),
    "fp8-params-megatron-fsdp": (
        f.workload(global_batch=32, precision="fp8", fp8_params=True, main_grads="bf16"),
        {"tp": 2, "dp": 8, "zero_stage": 3},
        {"fp8_param_gather": True, "use_megatron_fsdp": True, "grad_reduce_in_bf16": True},
    ),
    "fp8-params-zero2": (
        f.workload(global_batch=32, precision="fp8", fp8_params=True),
        {"tp": 2, "dp": 8, "zero_stage": 2},
        {"fp8_param_gather": True},
    ),
    "bf16-grads-bf16-moments": (
        f.workload(global_batch=32, main_grads="bf16", optimizer_moments="bf16"),
        {"tp": 2, "dp": 8, "zero_stage": 1},
        {"grad_reduce_in_bf16": True, "use_precision_aware_optimizer": True},
    ),
    # Megatron-FSDP runs the precision-aware optimizer (use_megatron_fsdp turns the
    # distributed optimizer on): bf16 moments on the FSDP shard, ZeRO-3 and ZeRO-2.
    "bf16-moments-megatron-fsdp": (
        f.workload(global_batch=32, optimizer_moments="bf16"),
        {"tp": 2, "dp": 8, "zero_stage": 3},
        {"use_megatron_fsdp": True, "data_parallel_sharding_strategy": "optim_grads_params",
         "use_distributed_optimizer": True, "use_precision_aware_optimizer": True,
         "exp_avg_dtype": torch.bfloat16, "exp_avg_sq_dtype": torch.bfloat16},
    ),  # fmt: skip
    "bf16-moments-megatron-fsdp-zero2": (
        f.workload(global_batch=8, optimizer_moments="bf16"),  # one micro-batch: optim_grads
        {"tp": 2, "dp": 8, "zero_stage": 2},
        {"use_megatron_fsdp": True, "data_parallel_sharding_strategy": "optim_grads",
         "use_precision_aware_optimizer": True, "exp_avg_sq_dtype": torch.bfloat16},
    ),  # fmt: skip
    "cpu-offload": (
        f.workload(global_batch=32),
        {"tp": 2, "dp": 8, "cpu_offload_layers": 4},
        {"cpu_offloading": True, "cpu_offloading_num_layers": 4},
    ),
    "cpu-offload-megatron-fsdp": (
        f.workload(global_batch=32),
        {"tp": 2, "dp": 8, "zero_stage": 3, "cpu_offload_layers": 4},
        {"use_megatron_fsdp": True, "cpu_offloading_num_layers": 4},
    ),
    "cpu-offload-cp": (
        f.workload(global_batch=32),
        {"tp": 2, "cp": 2, "dp": 4, "cpu_offload_layers": 4},
        {"context_parallel_size": 2, "cpu_offloading_num_layers": 4},
    ),
    "bf16-first-last-layers": (
        f.workload(global_batch=32, precision="fp8", fp8_recipe="tensorwise",
                   bf16_layers_start=1, bf16_layers_end=2),
        {"tp": 2, "dp": 8},
        {"first_last_layers_bf16": True, "num_layers_at_start_in_bf16": 1,
         "num_layers_at_end_in_bf16": 2, "fp8_recipe": "tensorwise"},
    ),  # fmt: skip
    "all-three": (
        f.workload(global_batch=32, precision="fp8", main_grads="bf16", fp8_params=True),
        {"tp": 2, "dp": 8, "cpu_offload_layers": 4},
        {"grad_reduce_in_bf16": True, "fp8_param_gather": True, "cpu_offloading_num_layers": 4},
    ),
}


@pytest.mark.parametrize("name", MEMORY_INPUTS)
def test_megatron_parses_the_memory_inputs(name, fake_world, monkeypatch):
    workload, fields, parsed = MEMORY_INPUTS[name]
    cluster = f.cluster(16)
    # A host link to offload over (the test GPU has none; the presets cite theirs).
    cluster = cluster.model_copy(
        update={"gpu": cluster.gpu.model_copy(update={"host_link_gb_per_s": 63.0})}
    )
    result = f.result_for(f.dense_model(), cluster, workload, Layout(**fields))
    ns = check_megatron(result, 0, fake_world, monkeypatch)
    assert {k: getattr(ns, k) for k in parsed} == parsed
    # The optimizer config pretrain_gpt.py builds (megatron/training/training.py
    # get_megatron_optimizer_config: every OptimizerConfig field from the args):
    # OptimizerConfig.__post_init__ asserts the distributed optimizer for bf16 moments.
    _te_fused_adam_stub(monkeypatch)
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    names = [x.name for x in dataclasses.fields(OptimizerConfig) if hasattr(ns, x.name)]
    opt = OptimizerConfig(**{k: getattr(ns, k) for k in names})
    bf16 = workload.optimizer_moments == "bf16"
    assert opt.use_precision_aware_optimizer == bf16
    assert opt.exp_avg_dtype == (torch.bfloat16 if bf16 else torch.float32)
    # The model config pretrain_gpt.py builds: TransformerConfig.__post_init__ runs Megatron's
    # own offloading checks (pipeline parallelism, recompute, layer count).
    from megatron.training.argument_utils import core_transformer_config_from_args

    ns.apply_rope_fusion = False  # stub: Transformer Engine is not installed here
    config = core_transformer_config_from_args(ns)
    assert config.cpu_offloading == bool(fields.get("cpu_offload_layers"))
    assert config.cpu_offloading_num_layers == fields.get("cpu_offload_layers", 0)


def _te_fused_adam_stub(monkeypatch) -> None:
    """Stub: Transformer Engine is not installed here. OptimizerConfig.__post_init__ checks
    that TE's FusedAdam takes the precision-aware arguments (the ones below) after its
    distributed-optimizer assert."""
    stub = types.ModuleType("transformer_engine.pytorch.optimizers")

    class FusedAdam:  # the four arguments OptimizerConfig looks for
        def __init__(
            self, params, master_weight_dtype=None, exp_avg_dtype=None, exp_avg_sq_dtype=None,
            use_decoupled_grad=False,
        ) -> None:  # fmt: skip
            pass

    stub.FusedAdam = FusedAdam
    for name in ("transformer_engine", "transformer_engine.pytorch"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "transformer_engine.pytorch.optimizers", stub)


def test_megatron_refuses_bf16_moments_without_the_distributed_optimizer(monkeypatch) -> None:
    """The rule the planner keeps (FrameworkProfile.zero_inputs): DDP (ZeRO-0) with the
    precision-aware optimizer is refused by megatron-core itself."""
    _te_fused_adam_stub(monkeypatch)
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    with pytest.raises(AssertionError, match="only supported with distributed optimizer"):
        OptimizerConfig(
            optimizer="adam", use_precision_aware_optimizer=True, exp_avg_dtype=torch.bfloat16
        )


# ---------------------------------------------------------------------------------- torchtitan

# bf16 optimizer moments are Megatron's precision-aware optimizer; the other exports refuse them
# (tests/integration/search/test_deepseek_recipe_plan.py).
TITAN_PLANS = [
    n
    for n in PLANS
    if PLANS[n][2].precision == "bf16"
    and PLANS[n][2].optimizer_moments == "fp32"
    and PLANS[n][3].get("order", TCDP) == TCDP
    # torch.distributed.pipelining keeps at most 3 local stages gathered: the torchtitan profile
    # refuses vp > 3 with ZeRO >= 2 under PP (test_torchtitan_refuses_vp_over_3 below).
    and PLANS[n][3].get("vp", 1) <= 3
]


@pytest.mark.parametrize("name", TITAN_PLANS)
def test_torchtitan_release_accepts_and_builds_the_same_mesh(name, fake_world):
    check_torchtitan(plan_result(name), 0, fake_world)


def test_torchtitan_refuses_vp_over_3():
    # The Megatron plan with 4 chunks per rank: exported to torchtitan (ZeRO-1 runs as FSDP2
    # ZeRO-2), evicted chunks would gather again, which the plan was not priced with.
    with pytest.raises(InvalidInput, match=r"vp \(4\) > 3 with ZeRO-2"):
        plan_exports.to_torchtitan(plan_result("interleaved-even"), 0, ("llama3", "llama3_debugmodel"))


@pytest.mark.parametrize("case", range(len(SEARCHED)))
@pytest.mark.parametrize("index", range(3))
def test_torchtitan_runs_the_plans_searched_for_it(case, index, fake_world):
    check_torchtitan(searched("torchtitan", case), index, fake_world)


def check_torchtitan(result: PlanResult, index: int, fake_world) -> None:
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    result = result.model_copy(update={"ranked": (result.ranked[index],)})
    lo = result.best.layout
    model = result.model
    recipe = None
    if model.name not in launch.TORCHTITAN_MODULES:
        # A model no torchtitan recipe builds (the export refuses it): a debug recipe of the
        # same kind carries the parallel settings (the model shape is not what is checked here;
        # test_model_handoff.py checks the recipes' models).
        moe = model.moe is not None
        recipe = ("deepseek_v3", "deepseek_v3_debugmodel") if moe else ("llama3", "llama3_debugmodel")
    args = plan_exports.to_torchtitan(result, 0, recipe)["release"]["args"]
    fake_world(lo.world_size)
    job = ConfigManager().parse_args(args)
    par = job.parallelism
    assert par.tensor_parallel_degree == lo.tp and par.pipeline_parallel_degree == lo.pp
    assert job.training.global_batch_size == result.workload.global_batch_seqs
    dims = ParallelDims.from_config(par, lo.world_size)
    mesh = dims.build_mesh()
    assert mesh.size() == lo.world_size
    ours = groups_of(result)
    if lo.dp_shard is not None:
        # HSDP: the shard groups are the inner dp_shard ranks of each DP group, the replica
        # groups the ranks dp_shard apart (torchtitan's (dp_replicate, dp_shard) mesh dims).
        dp0 = next(g for g in ours["dp"] if 0 in g)
        shard, rep = lo.dp_shard, lo.replicate_dp
        expected = {"dp_shard": dp0[:shard], "dp_replicate": dp0[::shard][:rep]}
        for titan, ranks_ in expected.items():
            m = dims.get_optional_mesh(titan)
            assert sorted(int(r) for r in m.mesh.flatten()) == sorted(ranks_), titan
    axes = [("tp", "tp"), ("cp", "cp"), ("pp", "pp"), ("dp", "batch")]
    if lo.ep > 1:
        # The routed experts' mesh (pp, dp_replicate, efsdp, ep): the expert shard group is
        # efsdp (HSDP: with its replicas dp_replicate, the dense ones' ranks), else all of
        # the expert-DP group.
        axes += [("ep", "ep"), ("edp_shard" if lo.dp_shard is not None else "edp", "efsdp")]
        if lo.dp_shard is not None:
            axes.append(("edp_replicate", "dp_replicate"))
    for axis, titan in axes:
        m = dims.get_optional_mesh(titan)
        if m is None:
            assert getattr(lo, axis, 1) == 1
            continue
        grid = m.mesh  # rank 0's group along the axis
        assert sorted(int(r) for r in grid.flatten()) == next(g for g in ours[axis] if 0 in g)


# ----------------------------------------------------------------------------------- DeepSpeed

DS_PLANS = [
    n
    for n in PLANS
    if PLANS[n][2].precision == "bf16"
    and PLANS[n][2].optimizer_moments == "fp32"
    and all(PLANS[n][3].get(k, 1) == 1 for k in ("vp", "cp", "ep"))
    and "dp_shard" not in PLANS[n][3]
    and PLANS[n][3].get("order", TCDP) == TCDP
]


@pytest.mark.parametrize("name", DS_PLANS)
def test_deepspeed_config_and_topology(name, fake_world):
    result = plan_result(name, framework.DEEPSPEED)
    lo = result.best.layout
    if lo.pp > 1 and lo.zero_stage == 0:
        # bf16 under pipelining without ZeRO is DeepSpeed's BF16_Optimizer, which the profile
        # does not price (framework.DEEPSPEED_BF16_PIPELINE): refused; its ZeRO-1 runs
        with pytest.raises(InvalidInput, match="needs ZeRO >= 1 under deepspeed.*BF16_Optimizer"):
            plan_exports.to_deepspeed(result)
        model, gpus, workload, fields = PLANS[name]
        zero1 = Layout(**{**fields, "zero_stage": 1})
        result = f.result_for(model, f.cluster(gpus), framework.DEEPSPEED.workload(workload), zero1)
    check_deepspeed(result, 0, fake_world)


@pytest.mark.parametrize("case", range(len(SEARCHED)))
@pytest.mark.parametrize("index", range(3))
def test_deepspeed_runs_the_plans_searched_for_it(case, index, fake_world):
    if SEARCHED[case][0].startswith("mixtral"):
        pytest.skip("the deepspeed profile plans dense models only (DeepSpeed-MoE not modelled)")
    check_deepspeed(searched("deepspeed", case), index, fake_world)


def deepspeed_optimizer(cfg, lo: Layout) -> str:
    """The optimizer wrapper DeepSpeed's engine picks for `cfg` (engine.py
    _do_optimizer_sanity_check, the installed method itself): its accessors only read
    `_config`, so it runs on an engine object holding the parsed config, never initialised."""
    from deepspeed.runtime.engine import DeepSpeedEngine

    engine = object.__new__(DeepSpeedEngine)
    for name, value in (("_config", cfg), ("global_rank", 0), ("pipeline_parallelism", lo.pp > 1)):
        object.__setattr__(engine, name, value)
    adam = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])
    return DeepSpeedEngine._do_optimizer_sanity_check(engine, adam)


def check_deepspeed(result: PlanResult, index: int, fake_world) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology

    result = result.model_copy(update={"ranked": (result.ranked[index],)})
    lo = result.best.layout
    out = plan_exports.to_deepspeed(result)
    fake_world(lo.world_size)
    topo = PipeModelDataParallelTopology(num_pp=lo.pp, num_mp=lo.tp, num_dp=lo.dp)

    class Mpu:
        """The mpu Megatron-DeepSpeed passes: DP size from the topology (deepspeed.initialize)."""

        def get_data_parallel_world_size(self):
            return topo.get_dim("data")

        def get_sequence_parallel_world_size(self):
            return 1

    import deepspeed.comm as ds_comm

    ds_comm.init_distributed(dist_backend="fake", auto_mpi_discovery=False)
    cfg = DeepSpeedConfig(out["config"], mpu=Mpu())
    assert cfg.train_batch_size == result.workload.global_batch_seqs
    assert cfg.zero_optimization_stage == lo.zero_stage
    # The priced 2 B gradients (the profile's main_grads bf16) are the engine's: its own
    # get_data_types and optimizer choice on this config run ZeRO's optimizer, or FP16_Optimizer
    # without ZeRO and pipelining, never BF16_Optimizer (a layout the profile does not price).
    assert result.workload.main_grads == "bf16"
    assert cfg.communication_data_type == torch.bfloat16
    assert deepspeed_optimizer(cfg, lo) == ("zero_optimization" if lo.zero_stage else "ddp_bf16")
    # ZeRO's reduction on its own stream with double ipg buffers, as the DP model and the memory
    # model price it (stage.stage_dp_parts, memory.buffer_bytes)
    # (overlap_comm off under pipelining, where the engine would turn it off itself)
    if lo.zero_stage:
        assert cfg.zero_config.overlap_comm is (lo.pp == 1)
        assert cfg.zero_config.contiguous_gradients is True
    if lo.zero_stage == 3:  # the reuse window, prefetch and live limit the models price
        assert cfg.zero_config.max_reuse_distance == (result.workload.zero3_max_reuse_distance or 0)
        assert cfg.zero_config.prefetch_bucket_size == memory.DEEPSPEED_PREFETCH_BUCKET_ELEMENTS
        assert cfg.zero_config.max_live_parameters == memory.DEEPSPEED_MAX_LIVE_ELEMENTS
    ours = groups_of(result)
    for axis, ds in (("tp", "model"), ("dp", "data"), ("pp", "pipe")):
        assert _sorted(topo.get_axis_comm_lists(ds)) == ours[axis] or getattr(lo, axis) == 1
    args = out["launch_args"]
    assert args[args.index("--tensor-model-parallel-size") + 1] == str(lo.tp)
    assert args[args.index("--pipeline-model-parallel-size") + 1] == str(lo.pp)


# --------------------------------------------------------------------------------- DeviceMesh


@pytest.mark.parametrize(
    "order", [TCDP, TCPD, (Axis.DP, Axis.TP, Axis.CP, Axis.PP)], ids=lambda o: "-".join(o)
)
def test_torch_device_mesh_builds_the_planned_groups(order, fake_world):
    from torch.distributed.device_mesh import init_device_mesh

    lo = Layout(tp=2, cp=2, dp=2, pp=2, order=order)
    fake_world(lo.world_size)
    spec = ranks.device_mesh(lo)
    mesh = init_device_mesh(
        "cpu", tuple(spec["mesh_shape"]), mesh_dim_names=tuple(spec["mesh_dim_names"])
    )
    grid = mesh.mesh.numpy()
    groups = ranks.rank_groups(lo)
    for dim, name in enumerate(spec["mesh_dim_names"]):
        along = np.moveaxis(grid, dim, -1).reshape(-1, grid.shape[dim])
        assert _sorted(along) == sorted(sorted(g) for g in groups[name])
        mine = dist.get_process_group_ranks(mesh.get_group(name))
        assert sorted(mine) == next(sorted(g) for g in groups[name] if 0 in g)


def test_torch_device_mesh_of_hsdp_builds_the_shard_and_replica_groups(fake_world):
    """HSDP's export names torchtitan's dimensions: torch builds its dp_replicate groups and,
    flattening (dp_shard, cp), its shard groups as the plan's."""
    from torch.distributed.device_mesh import init_device_mesh

    lo = Layout(tp=2, cp=2, dp=4, pp=1, dp_shard=2, zero_stage=3)
    fake_world(lo.world_size)
    spec = ranks.device_mesh(lo)
    mesh = init_device_mesh(
        "cpu", tuple(spec["mesh_shape"]), mesh_dim_names=tuple(spec["mesh_dim_names"])
    )
    groups = ranks.rank_groups(lo)
    mine = dist.get_process_group_ranks(mesh.get_group("dp_replicate"))
    assert sorted(mine) == next(sorted(g) for g in groups["dp_replicate"] if 0 in g)
    shard = mesh["dp_shard", "cp"]._flatten("shard_cp")
    mine = dist.get_process_group_ranks(shard.get_group())
    assert sorted(mine) == next(sorted(g) for g in groups["dp_shard"] if 0 in g)


@pytest.mark.parametrize("index", range(3))
def test_megatron_runs_the_plans_searched_with_offload(index, fake_world, monkeypatch):
    """`plan --cpu-offload-layers 8 --main-grads bf16`: the top 3 through parse_args,
    validate_args and TransformerConfig (which refuses offloading with pp > 1 or recompute)."""
    from megatron.training.argument_utils import core_transformer_config_from_args

    key = ("megatron-offload", 0)
    if key not in _searched:
        _searched[key] = planner.plan_for(
            "llama3-8b", "dgx-h100", num_gpus=16, top_k=3, cpu_offload_layers=8,
            workload_fields={"main_grads": "bf16"},
        )  # fmt: skip
    ns = check_megatron(_searched[key], index, fake_world, monkeypatch)
    ns.apply_rope_fusion = False  # stub: Transformer Engine is not installed here
    config = core_transformer_config_from_args(ns)
    assert (config.cpu_offloading_num_layers, ns.grad_reduce_in_bf16) == (8, True)


@pytest.mark.parametrize("kernel", ["unfused", "fa2"])
def test_megatron_runs_the_attention_kernel_the_plan_priced(kernel, fake_world, monkeypatch):
    """A plan priced with unfused attention (or FlashAttention-2) launches that backend:
    --attention-backend unfused / flash with --flash-attention-version 2 through parse_args,
    validate_args and TransformerConfig."""
    from megatron.core.transformer.enums import AttnBackend
    from megatron.training.argument_utils import core_transformer_config_from_args

    key = (f"megatron-attention-{kernel}", 0)
    if key not in _searched:
        _searched[key] = planner.plan_for(
            "llama3-8b", "dgx-h100", num_gpus=16, top_k=1,
            workload_fields={"attention_kernel": kernel},
        )  # fmt: skip
    ns = check_megatron(_searched[key], 0, fake_world, monkeypatch)
    ns.apply_rope_fusion = False  # stub: Transformer Engine is not installed here
    config = core_transformer_config_from_args(ns)
    backend = {"unfused": AttnBackend.unfused, "fa2": AttnBackend.flash}[kernel]
    assert config.attention_backend == backend
    assert config.flash_attention_version == (2 if kernel == "fa2" else None)
    # what the unfused class prices (cost_models.compute.megatron_fused_softmax,
    # UNFUSED_TORCH_SOFTMAX_BYTES): the fused softmax kernel enabled, and its PyTorch fallback
    # in the scores' bf16, not fp32
    assert (config.masked_softmax_fusion, config.attention_softmax_in_fp32) == (True, False)


def test_megatron_parses_nvfp4_weights_and_bf16_layers(fake_world, monkeypatch):
    """NVFP4 with its primary weights (--fp4-param-gather, Megatron-Bridge's NVFP4 recipe) and
    bf16 first / last layers through Megatron-LM's own parse_args + validate_args."""
    cluster = f.cluster(16)
    gpu = cluster.gpu.model_copy(update={"generation": "blackwell", "peak_fp4_tflops": 4000.0})
    cluster = cluster.model_copy(update={"gpu": gpu})
    workload = f.workload(
        global_batch=32, precision="nvfp4", fp8_params=True, bf16_layers_start=1,
        bf16_layers_end=2,
    )  # fmt: skip
    result = f.result_for(f.dense_model(), cluster, workload, Layout(tp=2, dp=8, zero_stage=1))
    from megatron.training import arguments

    # stub: Transformer Engine is not installed here (validate_args asks it for >= 2.7 under fp4)
    monkeypatch.setattr(arguments, "is_te_min_version", lambda *a, **k: True)
    ns = check_megatron(result, 0, fake_world, monkeypatch)
    assert (ns.fp4, ns.fp4_recipe, ns.fp4_param_gather) == ("e2m1", "nvfp4", True)
    assert ns.first_last_layers_bf16 and ns.fp8 is None
    assert (ns.num_layers_at_start_in_bf16, ns.num_layers_at_end_in_bf16) == (1, 2)


def test_megatron_parses_the_full_iteration_cuda_graph(fake_world, monkeypatch):
    """Workload.full_iteration_cuda_graph on a dense model: --cuda-graph-impl full_iteration with
    the NaN check off (validate_args asserts it) through Megatron-LM's own parse_args +
    validate_args."""
    workload = f.workload(global_batch=32, full_iteration_cuda_graph=True)
    result = f.result_for(f.dense_model(), f.cluster(16), workload, Layout(tp=2, dp=8, zero_stage=1))
    ns = check_megatron(result, 0, fake_world, monkeypatch)
    assert ns.cuda_graph_impl == "full_iteration" and not ns.check_for_nan_in_loss_and_grad


def test_megatron_parses_tp_overlap_with_te_defaults(fake_world, monkeypatch):
    """A plan priced with Transformer Engine's per-GEMM userbuffers defaults
    (Workload.tp_overlap te_default) runs as --tp-comm-overlap without --tp-comm-overlap-cfg:
    Megatron-LM then calls initialize_ub with no per-GEMM configuration (TE's defaults)."""
    workload = f.workload(global_batch=32, tp_overlap="te_default")
    lo = Layout(tp=2, dp=8, zero_stage=1, sequence_parallel=True, tp_comm_overlap=True)
    result = f.result_for(f.dense_model(), f.cluster(16), workload, lo)
    ns = check_megatron(result, 0, fake_world, monkeypatch)
    assert ns.tp_comm_overlap and ns.sequence_parallel and ns.tp_comm_overlap_cfg is None


def test_megatron_parses_a_stated_bucket_size(fake_world, monkeypatch):
    """A workload's DP bucket (Workload.dp_bucket_elements, priced by stage.dp_buckets and the
    edge buckets) reaches Megatron-LM as --ddp-bucket-size through its own parse_args +
    validate_args."""
    workload = f.workload(global_batch=32, dp_bucket_elements=134_217_728)
    result = f.result_for(f.dense_model(), f.cluster(16), workload, Layout(tp=2, dp=8, zero_stage=1))
    ns = check_megatron(result, 0, fake_world, monkeypatch)
    assert ns.ddp_bucket_size == 134_217_728 and ns.overlap_grad_reduce
