"""The hand-off builds the planned model (issue 26): the real frameworks read the exported
arguments alone (plus a tokenizer and a data source, nothing from the preset) and build the
model the plan priced.

- Megatron-LM (megatron-core 0.19.2): `parse_args` + `validate_args` of pretrain_gpt.py's parser on
  `plan_exports.to_megatron_args(result)`, then `core_transformer_config_from_args` (TransformerConfig's own
  checks), then Megatron's own GPTModel built on the meta device from that config (with the
  parallel degrees set to 1: the whole model on one rank): every shape field equal to the plan's
  model, and the parameter count equal to cost_models.params.total_params within 0.1 %.
- torchtitan 0.3.0: ConfigManager on the exported command line, then the recipe's own model
  (model_spec.model) built on the meta device: shape fields and parameter count likewise.
- DeepSpeed 0.19.8: DeepSpeedConfig on the exported ds_config.json (test_real_frameworks.py).

Cases (each the top 3 plans searched for the framework): dense GQA, Qwen2's QKV bias (an HF
config), MoE (Mixtral, Qwen3), MLA + MoE (DeepSeek-V3's default plan on 2,048 H800, fp8), a
sliding window (an HF Mistral config), long-context CP, FSDP (ZeRO-3), uneven PP.

Stubs (a CPU-only environment; each stands for the GPU machine the launch runs on):
- torch.cuda.current_device / device_count / get_device_capability: an 8-GPU Hopper node
  (validate_args reads the capability for --moe-grouped-gemm).
- megatron...transformer_config.is_te_min_version: Transformer Engine 2.8 (TransformerConfig
  checks TE's version for fp8 MoE and grouped GEMM; TE is not installed here).
- `--no-rope-fusion` is added to the launch arguments: the fused RoPE kernel is TE's.
- The meta-device count model: implementation switches without parameters are turned off (TE
  fusions, the all-to-all dispatcher's CUDA stream, grouped GEMM kernels), and MLA's core
  attention (TE-only, no parameters) is an IdentityOp.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.core", reason="real frameworks not installed (.ci/run)")
pytest.importorskip("torchtitan", reason="real frameworks not installed (.ci/run)")

import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cost_models.compute import windowed_layers
from cost_models.errors import InvalidInput
from cost_models.params import total_params
from models_zoo.hf import model_from_hf_config
from planner import convenience
from planner.export import launch, plan_exports
from planner.types import PlanResult

# HF config.json excerpts (the keys models_zoo.hf reads), as published on the Hub.
QWEN25_7B = {  # https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json
    "_name_or_path": "Qwen/Qwen2.5-7B",
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "sliding_window": 131072,
    "vocab_size": 152064,
}
MISTRAL_7B = {  # https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json
    "_name_or_path": "mistralai/Mistral-7B-v0.1",
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}
# Mistral 7B with a local / global pattern: three sliding-window layers, then one full, as HF
# `layer_types` lists it (the field gpt-oss and Gemma 3 configs carry); Megatron builds it as
# --window-attn-skip-freq 4.
MISTRAL_LOCAL_GLOBAL = {
    **MISTRAL_7B,
    "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(32)],
}

# name -> (model, cluster, api.plan keyword arguments)
CASES = {
    "dense-gqa": ("llama3.1-8b", "dgx-h100", {"num_gpus": 16}),
    "qwen2-qkv-bias": (QWEN25_7B, "dgx-h100", {"num_gpus": 16}),
    "mixtral": ("mixtral-8x7b", "dgx-h100", {"num_gpus": 32, "tp": 2}),
    "qwen3-moe": ("qwen3-30b-a3b", "dgx-h100", {"num_gpus": 16}),
    # routing forced even (a benchmarking mode), priced at the mean load per EP rank
    "qwen3-moe-balanced": (
        "qwen3-30b-a3b",
        "dgx-h100",
        {"num_gpus": 16, "workload_fields": {"moe_force_balance": True}},
    ),
    "deepseek-v3": (
        "deepseek-v3",
        "h800",
        {"num_gpus": 2048, "global_batch": 15360, "seq_len": 4096, "precision": "fp8"},
    ),
    "sliding-window": (MISTRAL_7B, "dgx-h100", {"num_gpus": 16}),
    "local-global": (MISTRAL_LOCAL_GLOBAL, "dgx-h100", {"num_gpus": 16}),
    "long-context-cp": (
        "llama3.1-8b",
        "dgx-h100",
        {"num_gpus": 64, "seq_len": 131072, "global_batch": 16, "cp": 8},
    ),
    "fsdp": ("llama3-8b", "dgx-h100", {"num_gpus": 16, "zero_stages": (3,)}),
    "uneven-pp": ("llama3-8b", "dgx-h100", {"num_gpus": 48, "pp": 3, "tp": 2}),
    # attention sinks, alternating 128-token windows, YaRN without truncation, the experts'
    # clamped quick-GeGLU with its +1 offset, biases everywhere (Megatron-Bridge GPTOSSBridge)
    "gpt-oss": ("gpt-oss-120b", "dgx-h100", {"num_gpus": 64, "global_batch": 512, "seq_len": 4096}),
    # long context: CP over the windows and sinks only with Transformer Engine's all-to-all CP
    "gpt-oss-a2a-cp": (
        "gpt-oss-120b",
        "dgx-h100",
        {"num_gpus": 128, "global_batch": 64, "seq_len": 32768, "cp": 4,
         "workload_fields": {"cp_attention": "a2a"}},
    ),
}
_plans: dict = {}


def planned(case: str, framework: str) -> PlanResult:
    key = (case, framework)
    if key not in _plans:
        model, cluster, kwargs = CASES[case]
        if isinstance(model, dict):
            model = model_from_hf_config(model, f"{model['_name_or_path']}/config.json")
        _plans[key] = convenience.plan_for(model, cluster, top_k=3, framework=framework, **kwargs)
    return _plans[key]


@pytest.fixture
def fake_world(monkeypatch):
    def start(world_size: int) -> None:
        monkeypatch.setenv("WORLD_SIZE", str(world_size))
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("LOCAL_RANK", "0")
        monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
        # A launch starts with none of these; Megatron's language_module writes them into
        # os.environ for the backend of the model built last in this process.
        for name in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)

    yield start
    if dist.is_initialized():
        from megatron.core import parallel_state

        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()


# ------------------------------------------------------------------------------------ Megatron


def megatron_config(args: list[str], env: dict[str, str], monkeypatch):
    """pretrain_gpt.py's parser, validate_args and TransformerConfig on the export alone."""
    from packaging.version import Version

    import megatron.core.transformer.transformer_config as tc
    from megatron.training import arguments
    from megatron.training.argument_utils import core_transformer_config_from_args

    monkeypatch.setattr(arguments, "get_device_arch_version", lambda: 9)  # stub: Hopper
    te = Version("2.8.0")  # stub: the Transformer Engine of a GPU deployment
    monkeypatch.setattr(tc, "is_te_min_version", lambda v, check_equality=True: te >= Version(v))
    monkeypatch.setattr(tc, "get_te_version", lambda: te)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # Required by pretrain_gpt.py but not part of the plan: a tokenizer and data source.
    extra = ["--tokenizer-type", "NullTokenizer", "--mock-data", "--lr", "1e-4"]
    extra += ["--train-iters", "10", "--no-rope-fusion"]
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *args, *extra])
    ns = arguments.parse_args()
    arguments.validate_args(ns)
    return ns, core_transformer_config_from_args(ns)


# Switches of the count model that hold no parameters (kernels, streams, schedules).
COUNT_ONLY = dict(
    tensor_model_parallel_size=1,
    pipeline_model_parallel_size=1,
    context_parallel_size=1,
    expert_model_parallel_size=1,
    expert_tensor_parallel_size=1,
    sequence_parallel=False,
    virtual_pipeline_model_parallel_size=None,
    pipeline_model_parallel_layout=None,
    num_layers_in_first_pipeline_stage=None,
    num_layers_in_last_pipeline_stage=None,
    fp8=None,
    fp8_recipe=None,
    tp_comm_overlap=False,
    use_cpu_initialization=True,
    perform_initialization=False,
    persist_layer_norm=False,
    gradient_accumulation_fusion=False,
    bias_activation_fusion=False,
    masked_softmax_fusion=False,
    apply_rope_fusion=False,
    bias_dropout_fusion=False,
    moe_grouped_gemm=False,
    moe_permute_fusion=False,
    moe_router_fusion=False,
    recompute_granularity=None,
    recompute_modules=None,
    recompute_method=None,
    recompute_num_layers=None,
    overlap_moe_expert_parallel_comm=False,
    delay_wgrad_compute=False,
    moe_token_dispatcher_type="allgather",
    moe_shared_expert_overlap=False,
)
_counts: dict = {}


def megatron_param_count(ns, cfg, monkeypatch) -> int:
    """Megatron's own GPTModel (the whole model on one rank) built on the meta device."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.identity_op import IdentityOp
    from megatron.training.vocab_utils import calculate_padded_vocab_size

    one = dataclasses.replace(cfg, **{k: v for k, v in COUNT_ONLY.items() if hasattr(cfg, k)})
    # argument_utils._apply_yarn_config_from_args sets yarn_* as plain attributes, which
    # dataclasses.replace does not carry
    for name in vars(cfg):
        if name.startswith("yarn_") and not hasattr(one, name):
            setattr(one, name, getattr(cfg, name))
    key = repr(one)
    if key in _counts:
        return _counts[key]
    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(1, 1, create_gloo_process_groups=False)
    spec = get_gpt_decoder_block_spec(one, use_transformer_engine=False)
    if one.multi_latent_attention:  # TE's attention kernel, no parameters
        for layer in spec.layer_specs:
            layer.submodules.self_attention.submodules.core_attention = IdentityOp
    vocab = calculate_padded_vocab_size(ns.vocab_size, ns.make_vocab_size_divisible_by, 1, False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "meta")
    with torch.device("meta"):
        model = GPTModel(
            one,
            spec,
            vocab_size=vocab,
            max_sequence_length=ns.max_position_embeddings,
            share_embeddings_and_output_weights=not ns.untie_embeddings_and_output_weights,
            position_embedding_type=ns.position_embedding_type,
            rotary_base=ns.rotary_base,
            rotary_percent=ns.rotary_percent,
            rope_scaling=ns.use_rope_scaling,
            rope_scaling_factor=ns.rope_scaling_factor,
        )
    _counts[key] = sum(p.numel() for p in model.parameters())
    return _counts[key]


def check_megatron_model(result: PlanResult, ns, cfg) -> None:
    """Every shape field of the plan's model in Megatron's config."""
    m, w = result.model, result.workload
    assert (cfg.num_layers, cfg.hidden_size) == (m.num_layers, m.hidden_size)
    assert cfg.num_attention_heads == m.num_attention_heads
    assert ns.seq_length == w.seq_len and ns.vocab_size == m.vocab_size
    assert ns.untie_embeddings_and_output_weights == (not m.tied_embeddings)
    assert cfg.normalization == {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}[m.normalization]
    assert cfg.layernorm_epsilon == m.norm_eps
    assert cfg.add_bias_linear == m.linear_bias
    assert cfg.add_qkv_bias == (m.qkv_bias or m.linear_bias)
    assert cfg.gated_linear_unit == m.gated_mlp
    from megatron.core.fusions.fused_bias_geglu import quick_gelu

    act = {"silu": torch.nn.functional.silu, "quick_gelu": quick_gelu}
    if m.gated_mlp:
        assert cfg.activation_func is act[m.mlp_activation]
    assert cfg.glu_linear_offset == m.glu_linear_offset
    assert cfg.activation_func_clamp_value == m.activation_clamp
    assert cfg.softmax_type == ("learnable" if m.attention_sinks else "vanilla")
    if m.attention_sinks:  # pinned: no silent fall-back to the unfused kernel
        from megatron.core.transformer.enums import AttnBackend

        assert cfg.attention_backend == AttnBackend.fused
    assert cfg.hidden_dropout == (0.1 if m.hidden_dropout else 0.0)
    if m.ffn_hidden_size is not None:
        assert cfg.ffn_hidden_size == m.ffn_hidden_size
    if m.mla is None:
        assert cfg.num_query_groups == m.kv_heads and cfg.kv_channels == m.attn_head_dim
        assert cfg.qk_layernorm == m.qk_norm
        yarn = m.rope_scaling is not None and m.rope_scaling.type == "yarn"
        assert ns.position_embedding_type == {"rope": "yarn" if yarn else "rope",
                                              "learned": "learned_absolute"}[m.position_embedding_kind]
        if yarn:  # GPTModel's YarnRotaryEmbedding reads these off the config
            rs = m.rope_scaling
            assert cfg.yarn_rotary_scaling_factor == rs.factor
            assert cfg.yarn_original_max_position_embeddings == rs.original_max_position_embeddings
            assert (cfg.yarn_beta_fast, cfg.yarn_beta_slow) == (rs.beta_fast, rs.beta_slow)
            assert cfg.yarn_correction_range_round_to_int == (rs.truncate is not False)
    else:
        mla = m.mla
        assert cfg.multi_latent_attention and cfg.qk_layernorm
        assert (cfg.q_lora_rank, cfg.kv_lora_rank) == (mla.q_lora_rank, mla.kv_lora_rank)
        assert (cfg.qk_head_dim, cfg.qk_pos_emb_head_dim) == (
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
        )
        assert cfg.v_head_dim == mla.v_head_dim
        if m.rope_scaling is not None:
            assert cfg.rope_type == "yarn" and cfg.rotary_scaling_factor == m.rope_scaling.factor
    if m.position_embedding_kind == "rope":
        assert ns.rotary_base == m.rotary_base and ns.rotary_percent == m.rotary_percent
    if m.rope_scaling is not None and m.rope_scaling.type == "llama3":
        assert ns.use_rope_scaling and ns.rope_scaling_factor == m.rope_scaling.factor
    if m.sliding_window is not None:
        assert tuple(cfg.window_size) == (m.sliding_window - 1, 0)
    else:
        assert cfg.window_size is None
    # the layers Megatron windows (its own per-layer rule, 1-based) are the ones priced windowed
    from megatron.core.transformer.utils import is_layer_window_attention

    megatron_windowed = [
        i
        for i in range(m.num_layers)
        if is_layer_window_attention(cfg.window_size, cfg.window_attn_skip_freq, i + 1)
    ]
    assert megatron_windowed == list(windowed_layers(m))
    if m.moe is not None:
        check_megatron_moe(result, cfg)


def check_megatron_moe(result: PlanResult, cfg) -> None:
    m, moe = result.model, result.model.moe
    assert (cfg.num_moe_experts, cfg.moe_router_topk) == (moe.num_experts, moe.top_k)
    assert cfg.moe_ffn_hidden_size == moe.expert_ffn_hidden_size
    shared = moe.num_shared_experts * moe.expert_ffn_hidden_size or None
    assert cfg.moe_shared_expert_intermediate_size == shared
    freq = cfg.moe_layer_freq
    layers = freq if isinstance(freq, list) else [1] * m.num_layers
    assert layers == [0] * moe.first_k_dense_layers + [1] * m.num_moe_layers
    assert cfg.moe_router_score_function == moe.router_score_function
    assert cfg.moe_router_pre_softmax == moe.router_pre_softmax
    assert cfg.moe_router_topk_scaling_factor == moe.router_topk_scaling_factor
    assert cfg.moe_router_enable_expert_bias == moe.router_expert_bias
    assert cfg.moe_router_num_groups == moe.router_num_groups
    assert cfg.moe_router_group_topk == moe.router_group_topk
    assert cfg.moe_grouped_gemm
    priced = {"alltoall": "alltoall", "deepep": "flex"}[result.workload.moe_dispatcher]
    assert cfg.moe_token_dispatcher_type == priced


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize("case", list(CASES))
def test_megatron_builds_the_planned_model(case, index, fake_world, monkeypatch):
    result = planned(case, "megatron")
    if index >= len(result.ranked):
        pytest.skip(f"{case}: the search returned {len(result.ranked)} plans")
    result = result.model_copy(update={"ranked": (result.ranked[index],), "fastest_index": 0})
    args = plan_exports.to_megatron_args(result)
    fake_world(result.best.layout.world_size)
    ns, cfg = megatron_config(args, launch.megatron_env(result.best), monkeypatch)
    assert cfg.tensor_model_parallel_size == result.best.layout.tp
    a2a = result.workload.cp_attention == "a2a" and result.best.layout.cp > 1
    assert cfg.context_parallel_size == result.best.layout.cp
    assert cfg.cp_comm_type == ("a2a" if a2a else "p2p")
    check_megatron_model(result, ns, cfg)
    count = megatron_param_count(ns, cfg, monkeypatch)
    planned_count = total_params(result.model)
    assert abs(count / planned_count - 1) <= 1e-3, (count, planned_count)


def test_deepseek_default_plan_is_accepted_with_its_recompute(fake_world, monkeypatch):
    """The issue's failing command: the default plan (top 1) builds, recompute included."""
    result = planned("deepseek-v3", "megatron")
    result = result.model_copy(update={"ranked": (result.ranked[0],), "fastest_index": 0})
    fake_world(result.best.layout.world_size)
    env = launch.megatron_env(result.best)
    _, cfg = megatron_config(plan_exports.to_megatron_args(result), env, monkeypatch)
    lo = result.best.layout
    if lo.recompute == "selective" and lo.recompute_modules is not None:
        assert list(cfg.recompute_modules) == list(lo.recompute_modules)


def test_megatron_refuses_what_it_cannot_express():
    bloom = planned_model("bloom-176b")
    with pytest.raises(InvalidInput, match="ALiBi"):
        launch.megatron_model_args(bloom, _workload())


def planned_model(name: str):
    import models_zoo

    return models_zoo.load_model(name)


def _workload():
    from cost_models.specs import Workload

    return Workload(seq_len=2048, global_batch_seqs=64)


# ---------------------------------------------------------------------------------- torchtitan

# The presets a torchtitan 0.3.0 recipe builds (launch.TORCHTITAN_MODULES, by preset name).
TITAN_PRESETS = ["llama3.1-8b", "llama3.1-70b", "qwen3-30b-a3b", "gpt-oss-120b"]
ROPE_SCALING = {None: "none", "llama3": "llama", "yarn": "yarn"}


def _configs(node, seen=None):
    """Every dataclass config under `node` (torchtitan's nested Module.Config tree)."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if dataclasses.is_dataclass(node):
        yield node
        for f in dataclasses.fields(node):
            yield from _configs(getattr(node, f.name), seen)
    elif isinstance(node, (list, tuple)):
        for item in node:
            yield from _configs(item, seen)


def _first(cfg, field: str):
    return next(getattr(c, field) for c in _configs(cfg) if getattr(c, field, None) is not None)


_titan_counts: dict = {}


def titan_model(args: list[str]):
    """The recipe's model config (ConfigManager on the exported command line) and the parameter
    count of torchtitan's own model built from it on the meta device."""
    from torchtitan.config.manager import ConfigManager

    job = ConfigManager().parse_args(args)
    cfg = job.model_spec.model
    key = tuple(args[:4])
    if key not in _titan_counts:
        with torch.device("meta"):
            _titan_counts[key] = sum(p.numel() for p in cfg.build().parameters())
    return cfg, _titan_counts[key]


def check_titan_model(model, cfg, count: int) -> None:
    assert (cfg.dim, cfg.vocab_size, len(cfg.layers)) == (
        model.hidden_size,
        model.vocab_size,
        model.num_layers,
    )
    assert bool(getattr(cfg, "enable_weight_tying", False)) == model.tied_embeddings
    assert _first(cfg, "n_heads") == model.num_attention_heads
    if model.mla is None:
        assert _first(cfg, "n_kv_heads") == model.kv_heads
    else:
        assert (_first(cfg, "q_lora_rank"), _first(cfg, "kv_lora_rank")) == (
            model.mla.q_lora_rank,
            model.mla.kv_lora_rank,
        )
    assert _first(cfg, "theta") == model.rotary_base
    scaling = model.rope_scaling.type if model.rope_scaling else None
    assert _first(cfg, "scaling") == ROPE_SCALING[scaling]
    if scaling == "yarn":  # RoPE.Config.truncate: DeepSeek floors the cutoffs, gpt-oss does not
        truncate = next(c.truncate for c in _configs(cfg) if hasattr(c, "truncate"))
        assert truncate == (model.rope_scaling.truncate is not False)
    assert _first(cfg, "eps") == model.norm_eps
    if model.moe is not None:
        assert _first(cfg, "num_experts") == model.moe.num_experts
    # each layer's window (torchtitan gpt_oss: sliding_window_size per layer) is the priced one
    windows = [
        next((c.sliding_window_size for c in _configs(layer) if hasattr(c, "sliding_window_size")), None)
        for layer in cfg.layers
    ]
    windowed = set(windowed_layers(model))
    assert windows == [model.sliding_window if i in windowed else None for i in range(len(windows))]
    assert abs(count / total_params(model) - 1) <= 1e-3, (count, total_params(model))


@pytest.mark.parametrize("preset", TITAN_PRESETS)
def test_torchtitan_recipe_builds_the_preset(preset):
    import models_zoo

    model = models_zoo.load_model(preset)
    module, config = launch.torchtitan_recipe(model)
    cfg, count = titan_model(["--module", module, "--config", config])
    check_titan_model(model, cfg, count)


TITAN_CASES = ["dense-gqa", "qwen3-moe", "long-context-cp"]


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize("case", TITAN_CASES)
def test_torchtitan_builds_the_planned_model(case, index, fake_world):
    result = planned(case, "torchtitan")
    if index >= len(result.ranked):
        pytest.skip(f"{case}: the search returned {len(result.ranked)} plans")
    args = plan_exports.to_torchtitan(result, index)["release"]["args"]
    fake_world(result.ranked[index].layout.world_size)
    cfg, count = titan_model(args)
    check_titan_model(result.model, cfg, count)


def test_torchtitan_forces_the_routing_the_plan_was_priced_at():
    """A plan priced with routing forced even (Workload.moe_force_balance) launches torchtitan
    with --debug.moe_force_load_balance, which its own parser takes; the default plan without."""
    from torchtitan.config.manager import ConfigManager

    for case, forced in (("qwen3-moe-balanced", True), ("qwen3-moe", False)):
        result = planned(case, "torchtitan")
        basis = result.ranked[0].moe_routing["basis"]
        assert (basis == "force_balance") is forced
        args = plan_exports.to_torchtitan(result)["release"]["args"]
        assert ConfigManager().parse_args(args).debug.moe_force_load_balance is forced


@pytest.mark.parametrize("case", ["qwen2-qkv-bias", "mixtral", "sliding-window", "local-global"])
def test_torchtitan_refuses_models_no_recipe_builds(case):
    result = planned(case, "megatron")
    with pytest.raises(InvalidInput, match="no torchtitan 0.3.0 recipe builds"):
        plan_exports.to_torchtitan(result)


# ----------------------------------------------------------------------------------- DeepSpeed


@pytest.mark.parametrize("case", ["fsdp", "uneven-pp"])
def test_deepspeed_reads_the_handoff_ds_config(case, tmp_path, fake_world):
    """ds_config.json of the hand-off directory, as the file the launcher passes."""
    import json

    from deepspeed.runtime.config import DeepSpeedConfig

    from planner.export.handoff import handoff_files

    result = planned(case, "deepspeed")
    files, skipped = handoff_files(result, {})
    assert "ds_config.json" in files, skipped
    path = tmp_path / "ds_config.json"
    path.write_text(files["ds_config.json"])
    lo = result.best.layout
    fake_world(lo.world_size)

    class Mpu:  # the DP size Megatron-DeepSpeed's mpu reports
        def get_data_parallel_world_size(self):
            return lo.dp

        def get_sequence_parallel_world_size(self):
            return 1

    import deepspeed.comm as ds_comm

    ds_comm.init_distributed(dist_backend="fake", auto_mpi_discovery=False)
    cfg = DeepSpeedConfig(str(path), mpu=Mpu())
    assert cfg.train_batch_size == result.workload.global_batch_seqs
    assert cfg.zero_optimization_stage == lo.zero_stage
    assert json.loads(files["ds_config.json"])["train_micro_batch_size_per_gpu"] == lo.micro_batch
