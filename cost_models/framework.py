"""Framework profiles: what the training framework a plan is for can run, and how it computes.

A profile decides three things (issue 15):

- the search space: the rank orders its launcher builds, its sharding variants (ZeRO stages),
  its recompute granularities, whether it interleaves pipeline stages, CP and EP;
- the physics that differ by framework (the `Workload` fields below and `Layout.tp_comm_overlap`),
  each a `Setting` with its source; a field the user sets on the workload wins (`apply`);
- the export (planner/export/*), which targets the profile's `version`.

Every value is data with the source it was read from (file and function of the framework at the
version named), never something guessed from a run's free text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .accumulation import MAX_ACTIVE_STAGES
from .errors import InvalidInput
from .pipeline import layout_chunk_counts, split_slots
from .specs import Axis, Layout, ModelSpec, Recompute, Workload, expert_shard_mesh_whole

FrameworkName = Literal["megatron", "torchtitan", "deepspeed"]
FRAMEWORKS: tuple[FrameworkName, ...] = ("megatron", "torchtitan", "deepspeed")
DEFAULT_FRAMEWORK: FrameworkName = "megatron"

PHYSICS_FIELDS = (
    "cross_entropy",
    "fused_elementwise",
    "selective_recompute",
    "fp8_dynamic_scaling",
    "attention_kernel",
    "attention_unpad",
    "cp_attention",
    "pp_keeps_outputs",
    "dp_sync",
    "dp_accumulation",
    "expert_gemm_launch",
    "host_s_per_kernel",
    "host_issue",
    "moe_host_sync",
    "grad_clip",
    "grad_zeroing",
    "grad_nan_check",
    "grad_average_in_collective",
    "main_grads",
    "fsdp_copies",
    "zero3_16bit_shard",
    "zero3_max_reuse_distance",
    "zero3_prefetch_elements",
    "head_tp_backward",
    "step_grad_copies",
    "moe_dispatch",
    "ep_dispatch_fp8",
    "memory_phases",
    "tp_overlap",
)
"""The Workload fields a profile sets (their meaning: cost_models/specs.py Workload)."""

TP, CP, DP, PP = Axis.TP, Axis.CP, Axis.DP, Axis.PP


@dataclass(frozen=True)
class Setting:
    """One framework default and where it comes from."""

    value: Any
    source: str


@dataclass(frozen=True)
class FrameworkProfile:
    name: str
    version: str
    rank_orders: tuple[tuple[Axis, ...], ...]
    """Orders (innermost first) the launcher builds for a dense model."""
    moe_rank_orders: tuple[tuple[Axis, ...], ...]
    """Orders it builds for a mixture-of-experts model."""
    orders_source: str
    zero_stages: tuple[int, ...]
    zero_source: str
    recompute: tuple[Recompute, ...]
    max_vp: int | None
    """None: interleaving as deep as the search allows; 1: no interleaved schedule."""
    max_cp: int | None
    max_ep: int | None
    schedules: str
    physics: dict[str, Setting]
    tp_comm_overlap: Setting
    limits_source: str = ""
    hsdp: bool = False
    """Whether the search tries hybrid sharding (Layout.dp_shard) with ZeRO >= 2."""
    moe: bool = True
    """Whether its MoE (expert-parallel) layers are modelled."""
    exportable: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)
    dualpipe: bool = False
    """Whether it runs DeepSeek's DualPipe schedule (Layout.pp_schedule "dualpipe"): none of the
    launchers here has it (github deepseek-ai/DualPipe is a library of its own)."""
    ep_overlap: bool = False
    """Whether it overlaps the MoE all-to-all with another micro-batch (Layout.ep_overlap):
    Megatron-LM --overlap-moe-expert-parallel-comm (megatron/core/model_parallel_config.py)."""
    no_inputs: tuple[tuple[str, str], ...] = ()
    """Inputs (Workload / Layout field, why) this launcher has no setting for: plan and estimate
    refuse them for it (input_violations), as its export would."""
    zero_inputs: tuple[tuple[str, int, str], ...] = ()
    """Inputs (Workload field, the lowest ZeRO stage that runs it, why) this launcher runs only
    from a ZeRO stage up: the search counts the stages below as rejections
    (zero_input_violations, planner/search/candidates.py), the export refuses them."""
    sliding_window: str = ""
    """How the launcher takes sliding-window layers (ModelSpec.sliding_window), with its source;
    "": it has no option for them (the plan is priced with the window, the export refuses)."""
    experts_follow_tp: str = ""
    """Where the launcher splits a MoE model's routed experts over TP whenever EP is off (every
    expert's weights column- / row-wise like a dense MLP: Layout.etp = tp at ep 1), the source;
    "": the layout's own etp (Megatron --expert-tensor-parallel-size, which the export writes)."""

    recompute_knobs: str = ""
    """Why the launcher has none of Megatron-Core's recompute knobs (Layout.recompute_modules,
    recompute_method, recompute_num_layers), with its source; "": it has them (Megatron
    --recompute-modules, --recompute-method, --recompute-num-layers, which the export writes)."""

    def orders_for(self, model: ModelSpec) -> tuple[tuple[Axis, ...], ...]:
        return self.moe_rank_orders if model.moe is not None else self.rank_orders

    def workload(self, workload: Workload, model: ModelSpec | None = None) -> Workload:
        """`workload` with the profile's physics where the workload did not set the field. With
        the `model`: a model whose attention Transformer Engine's p2p ring refuses (sliding
        windows, attention sinks) takes its all-to-all CP where the profile's CP is that ring,
        as Megatron-Bridge's gpt-oss recipes set it (src/megatron/bridge/recipes/gpt_oss/h100/
        gpt_oss.py: cp_comm_type "a2a", "required for TE attention backends with learnable
        softmax" when CP > 1); without CP it changes nothing."""
        update = {k: s.value for k, s in self.physics.items() if k not in workload.model_fields_set}
        ring_refuses = model is not None and (
            model.sliding_window is not None or model.attention_sinks
        )
        runs_a2a = all(name != "cp_attention" for name, _why in self.no_inputs)
        if ring_refuses and runs_a2a and update.get("cp_attention") == "fused_ring":
            update["cp_attention"] = "a2a"
        return workload.model_copy(update=update) if update else workload

    def layout(self, layout: Layout, model: ModelSpec | None = None) -> Layout:
        """`layout` with the profile's defaults where the layout did not set them: its TP-overlap
        default, and with the `model` the expert TP of a launcher whose routed experts follow
        TP at EP 1 (experts_follow_tp: etp = tp)."""
        update: dict[str, Any] = {}
        if "etp" not in layout.model_fields_set and model is not None:
            etp = expert_tp(self, model, layout.tp, layout.ep)
            if etp != layout.etp:
                update["etp"] = etp
        overlap = bool(self.tp_comm_overlap.value) and layout.tp > 1
        if overlap and "tp_comm_overlap" not in layout.model_fields_set:
            update["tp_comm_overlap"] = True
        return layout.model_copy(update=update) if update else layout

    def describe(self) -> dict[str, Any]:
        """The profile as JSON-able data (reports, `--json`)."""
        return {
            "name": self.name,
            "version": self.version,
            "rank_orders": ["-".join(a.value for a in o) for o in self.rank_orders],
            "moe_rank_orders": ["-".join(a.value for a in o) for o in self.moe_rank_orders],
            "zero_stages": list(self.zero_stages),
            "recompute": list(self.recompute),
            "max_vp": self.max_vp,
            "max_cp": self.max_cp,
            "max_ep": self.max_ep,
            "physics": {k: s.value for k, s in self.physics.items()},
            "tp_comm_overlap": self.tp_comm_overlap.value,
        }


# ------------------------------------------------------------------------------- physics sets

_MEGATRON_PHYSICS = {
    "tp_overlap": Setting(
        "te_default",
        "megatron/training/initialize.py _initialize_tp_communicators: without "
        "--tp-comm-overlap-cfg, te_module.base.initialize_ub(ub_cfgs=None), whose "
        "get_default_config gives every GEMM name Transformer Engine's default "
        "(cost_models/tp_overlap.py CONFIGS['te_default'])",
    ),
    "memory_phases": Setting(
        "additive",
        "Megatron-Core keeps its bf16 parameters and the contiguous fp32 main-gradient buffer "
        "resident for the whole step (megatron/core/distributed/param_and_grad_buffer.py), so "
        "the states do not change between the loss and the end of backward",
    ),
    "cross_entropy": Setting(
        "fused",
        "--cross-entropy-loss-fusion (the export sets it): megatron/core/fusions/"
        "fused_cross_entropy.py jit-fused passes over one fp32 copy of the TP-sharded logits "
        "(tensor_parallel/cross_entropy.py calculate_logits_max `.float()`), turned into the "
        "softmax and the gradient in place; without the flag Megatron-LM runs the same passes "
        "unfused, one kernel each",
    ),
    "fused_elementwise": Setting(
        True,
        "Transformer Engine layers (megatron/core/extensions/transformer_engine.py): fused "
        "LayerNorm/RMSNorm+GEMM, fused rotary (apply_rope_fusion), fused SwiGLU (bias_swiglu)",
    ),
    "selective_recompute": Setting(
        "attention",
        "megatron/core/transformer/transformer_config.py recompute_granularity='selective' "
        "recomputes recompute_modules=['core_attn'] by default",
    ),
    "fp8_dynamic_scaling": Setting(
        False,
        "megatron/core/transformer/transformer_config.py fp8_recipe defaults to 'delayed' "
        "(scales from the amax history)",
    ),
    "attention_kernel": Setting(
        "fused",
        "megatron/core/transformer/enums.py AttnBackend.auto: Transformer Engine DotProductAttention"
        " (cuDNN fused attention / FlashAttention-3 on Hopper)",
    ),
    "attention_unpad": Setting(
        False,
        "Transformer Engine attention takes q, k, v in the padded layout "
        "(megatron/core/extensions/transformer_engine.py TEDotProductAttention qkv_format "
        "'sbhd'): no unpad copies",
    ),
    "cp_attention": Setting(
        "fused_ring",
        "Transformer Engine attention with cp_comm_type 'p2p' (K/V ring overlapped with the "
        "fused kernel), megatron/core/transformer/transformer_config.py cp_comm_type",
    ),
    "pp_keeps_outputs": Setting(
        False,
        "megatron/core/pipeline_parallel/schedules.py keeps only the loss of each micro-batch "
        "on the last stage (output tensors are freed after backward, deallocate_output_tensor)",
    ),
    "dp_sync": Setting(
        "megatron",
        "megatron/core/distributed/distributed_data_parallel.py DistributedDataParallel.__init__: "
        "bucket_size max(40000000, 1000000 x dp), bucketing off on pipeline ranks > 0 and for "
        "model chunks > 0; megatron/core/pipeline_parallel/schedules.py launches each chunk's "
        "grad sync after its last backward (align_grad_reduce, training/config/common_config.py)",
    ),
    "dp_accumulation": Setting(
        "last_micro_batch",
        "megatron/core/pipeline_parallel/schedules.py forward_backward_no_pipelining runs every "
        "micro-batch but the last under config.no_sync_func (DDP no_sync: grads accumulate in "
        "the main_grad buffer), the pipelined schedules disable grad sync until the last "
        "backward; finalize_model_grads then reduces once (DDP and distributed optimizer). "
        "ZeRO-2 is priced as Megatron-class ZeRO-2 runs describe it (one reduce-scatter after "
        "the last micro-batch, MegaScale sec. 3.2), with m > 1 the distributed optimizer's "
        "schedule and memory, which the Megatron export then launches; Megatron-FSDP "
        "optim_grads reduce-scatters every backward (megatron-core 0.19.2 megatron_fsdp.py "
        "grad_reduce_every_bprop): a run of it states 'zero2_every_micro_batch'",
    ),
    "expert_gemm_launch": Setting(
        "per_expert",
        "megatron/core/transformer/moe/experts.py TEGroupedMLP on megatron/core/extensions/"
        "transformer_engine.py TEGroupedLinear (te.pytorch.GroupedLinear): "
        "transformer_engine/pytorch/module/grouped_linear.py general_grouped_gemm runs num_gemms "
        "(= local experts) cuBLAS GEMMs over the host-side m_splits",
    ),
    "host_s_per_kernel": Setting(
        6.26e-6,
        "measured: bench/results/h100-2026-11-26/layers/launch.csv (one tiny kernel launched "
        "eagerly from Python, torch 2.11, one H100 host: 6.26 us of host time)",
    ),
    "host_issue": Setting(
        "te_modules",
        "megatron/core/models/gpt/gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec "
        "(the default with Transformer Engine): linear_qkv / linear_fc1 "
        "TELayerNormColumnParallelLinear, linear_proj / linear_fc2 TERowParallelLinear, MoE "
        "experts TEGroupedMLP (TE GroupedLinear); per-call CPU time: TransformerEngine PR #3523",
    ),
    "grad_clip": Setting(
        "clip",
        "megatron/training/arguments.py --clip-grad default 1.0; megatron/core/optimizer/"
        "optimizer.py MixedPrecisionOptimizer.step -> clip_grad_norm: clip_grads.py "
        "get_grad_norm_fp32 (multi_tensor_l2norm over the fp32 main grads) and "
        "clip_grad_by_total_norm_fp32 (Transformer Engine's multi_tensor_scale_tensor with the "
        "clamped coefficient: a scale pass every step)",
    ),
    "grad_zeroing": Setting(
        True,
        "megatron/training/training.py train_step: model_chunk.zero_grad_buffer() every "
        "iteration -> megatron/core/distributed/distributed_data_parallel.py zero_grad_buffer "
        "-> param_and_grad_buffer.py _ParamAndGradBuffer.reset: self.grad_data.zero_() (the "
        "whole buffer, dense and expert; the distributed optimizer's zero_grad sets its fp32 "
        "shard gradients to None)",
    ),
    "grad_nan_check": Setting(
        True,
        "megatron/training/arguments.py --no-check-for-nan-in-loss-and-grad (store_false: "
        "check_for_nan_in_loss_and_grad True) -> DistributedDataParallelConfig "
        "check_for_nan_in_grad; NeMo's and Megatron-Bridge's recipes set "
        "check_for_nan_in_grad=True: param_and_grad_buffer.py check_grads takes every "
        "bucket's grad_data.norm(p=2) before its collective",
    ),
    "grad_average_in_collective": Setting(
        True,
        "NeMo's and Megatron-Bridge's recipes set DistributedDataParallelConfig("
        "average_in_collective=True); Megatron-LM's --ddp-average-in-collective is off by "
        "default, and the megatron export writes it, so no bucket is pre-scaled but the "
        "expert buckets where EDP != DP x CP (distributed_data_parallel.py "
        "expert_gradient_scaling_factor)",
    ),
    "zero3_16bit_shard": Setting(
        True,
        "megatron-core 0.19 distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py: each "
        "parameter group has a model_weight_buffer in the compute dtype, distributed under "
        "optim_grads_params (ZeRO-3), and a main_weight_buffer in main_params_dtype (fp32), "
        "distributed from optim up",
    ),
    "zero3_max_reuse_distance": Setting(
        None,
        "megatron-core 0.19 distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py _post_forward: "
        "'Release the module parameters after the forward pass to save memory' "
        "(release_module_parameters; lazily only inside a recomputation forward)",
    ),
    "zero3_prefetch_elements": Setting(
        500_000_000,
        "megatron-core 0.19 megatron_fsdp.py: suggested_communication_unit_size unset under "
        "optim_grads_params -> 2 x the mean FSDP unit, capped below at 1e9 elements; "
        "suggested_AG_prefetch_size = half of it; param_and_grad_buffer.py all_gather_params "
        "extends the gathered buckets with whole bucket groups until the prefetched elements "
        "reach it (fsdp_double_buffer, which stops at two units, is off unless --nccl-ub); "
        "the same suggested_communication_unit_size is the gradient reduce-scatter queue's "
        "capacity (suggested_RS_queue_capacity), max(1e9, bucket_size) unset under "
        "optim_grads (memory.grad_queue_bytes)",
    ),
    "head_tp_backward": Setting(
        "overlapped",
        "megatron-core 0.19 tensor_parallel/layers.py "
        "LinearWithGradAccumulationAndAsyncCommunication.backward (the output layer is a "
        "ColumnParallelLinear, models/gpt/gpt_model.py): under "
        "sequence parallelism the input all-gather with async_op=True before the dgrad GEMM, the "
        "input-gradient reduce-scatter (all-reduce without it) with async_op=True before the "
        "wgrad GEMM",
    ),
    "step_grad_copies": Setting(
        "megatron",
        "megatron-core 0.19 optimizer/distrib_optimizer.py _copy_model_grads_to_main_grads: "
        "`shard_main_param.grad = shard_model_grad.float()` (a copy under --grad-reduce-in-bf16, "
        "the fp32 buffer itself otherwise), decoupled_grad under the precision-aware optimizer, "
        "an early return under Megatron-FSDP; optimizer.py Float16OptimizerWithFloat16Params "
        "`main_param.grad = model_param.main_grad.float()` without the distributed optimizer",
    ),
    "fsdp_copies": Setting(
        "none",
        "DDP and the distributed optimizer communicate the contiguous grad / param buffers in "
        "place (megatron/core/distributed/param_and_grad_buffer.py); Megatron-FSDP's copies are "
        "not modelled",
    ),
    "moe_dispatch": Setting(
        "permute",
        "megatron/core/transformer/moe/token_dispatcher.py token_permutation / token_unpermutation:"
        " moe_utils.permute (index_select of the routed rows) and unpermute (scatter_add back), "
        "one copy each way per routed row",
    ),
    "ep_dispatch_fp8": Setting(
        False,
        "megatron/core/transformer/moe/token_dispatcher.py _DeepepManager.dispatch passes the "
        "bf16 hidden states to fused_a2a.fused_dispatch (no fp8 path; TE quantizes inside the "
        "expert GEMM), and HybridEP: 'fp8_dispatch = False  # Currently, we do not support fp8 "
        "dispatch' (fused_a2a.py, megatron-core 0.19)",
    ),
    "moe_host_sync": Setting(
        "every_layer",
        "megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher."
        "_maybe_dtoh_and_synchronize: d2h_event.synchronize() at cuda_sync_point "
        "(before_ep_alltoall with EP or TP > 1, before_finish otherwise) in every MoE forward; "
        "MoEAllGatherTokenDispatcher .cpu() of tokens_per_expert",
    ),
}

_TORCHTITAN_PHYSICS = {
    "tp_overlap": Setting(
        "collective_matmul",
        "parallelism.enable_async_tensor_parallel: torch micro-pipeline TP "
        "(torch/distributed/_symmetric_memory fused_all_gather_matmul / "
        "fused_matmul_reduce_scatter), no userbuffers configuration",
    ),
    "cross_entropy": Setting(
        "fused",
        "torchtitan/components/loss.py build_cross_entropy_loss: compiled with the model when "
        "compile.enable and 'loss' in compile.components (the export turns both on)",
    ),
    "fused_elementwise": Setting(
        True,
        "torch.compile of each transformer block (torchtitan/distributed/compile.py, "
        "compile.components=['model','loss']; the export turns it on) fuses norms, rotary and "
        "SwiGLU",
    ),
    "selective_recompute": Setting(
        "every_other_matmul",
        "torchtitan/distributed/activation_checkpoint.py selective op policy: saves every "
        "other matmul output (plus SDPA), recomputes the rest",
    ),
    "fp8_dynamic_scaling": Setting(
        True,
        "torchtitan/components/quantization/float8.py Float8LinearConverter.Config recipe_name "
        "'rowwise' (torchao Float8Linear): scales from the current tensor's amax",
    ),
    "attention_kernel": Setting(
        "fa2",
        "FlashAttention-2, torch SDPA's flash backend: what torchtitan's language models ran on "
        "Hopper through 2025 (cuDNN attention opt-in since PyTorch 2.5.1, pytorch#138522; its "
        "SDPA wrapper put FLASH first below compute capability 10, torchtitan#1196) and what "
        "the shared torchtitan runs ran. Not torchtitan 0.3.0's: its recipes build "
        "FlexAttention with per-document block-causal masks (models/common/config_utils.py "
        "get_attention_config; model_registry attn_backend 'flex', gpt-oss 'varlen'), which no "
        "input prices yet (docs/cost_model.md, calibration)",
    ),
    "attention_unpad": Setting(
        False,
        "torch.nn.functional.scaled_dot_product_attention on the padded [b, h, s, d] tensors "
        "(torchtitan/models/common/attention.py): no unpad copies",
    ),
    "cp_attention": Setting(
        "torch_ring",
        "torch.distributed.tensor.experimental.context_parallel (torchtitan/distributed/"
        "context_parallel): all-gather K/V rotation with eager fp32 merges",
    ),
    "pp_keeps_outputs": Setting(
        True,
        "torch.distributed.pipelining schedules keep output_chunks for step()'s return value "
        "(torch/distributed/pipelining/schedules.py, pytorch#165822)",
    ),
    "dp_sync": Setting(
        "fsdp",
        "torchtitan/distributed/fsdp.py apply_fsdp: fully_shard per transformer block, so each "
        "block's gradients are one reduce-scatter (FSDP2 unit)",
    ),
    "dp_accumulation": Setting(
        "every_micro_batch",
        "torchtitan/trainer.py train_step (0.3.0): one forward_backward_step per "
        "gradient_accumulation_steps = global_batch_size / (local_batch_size x dp), no "
        "set_requires_gradient_sync on the model, so FSDP2 (FSDPParamGroup.post_backward, "
        "reduce_grads and reshard_after_backward True) reduce-scatters (and, HSDP, all-reduces) "
        "after every micro-batch and the next forward gathers again; with PP "
        "torch/distributed/pipelining/stage.py backward_maybe_with_nosync defers sync and "
        "resharding to perform_reduce_grad after the last backward",
    ),
    "expert_gemm_launch": Setting(
        "grouped",
        "torchtitan/models/common/moe.py GroupedExperts (torchtitan 0.3.0): w1, w3 and w2 each "
        "one torch._grouped_mm over all local experts with device-side offsets "
        "(cumsum of num_tokens_per_expert)",
    ),
    "host_s_per_kernel": Setting(
        6.26e-6,
        "measured: bench/results/h100-2026-11-26/layers/launch.csv (one tiny kernel launched "
        "eagerly from Python, torch 2.11, one H100 host: 6.26 us of host time)",
    ),
    "host_issue": Setting(
        "kernels",
        "torchtitan builds its models from plain torch.nn modules (torchtitan/models/llama3/"
        "model/model.py: nn.Linear, F.scaled_dot_product_attention): one launch per kernel",
    ),
    "grad_clip": Setting(
        "clip",
        "torchtitan/trainer.py train_step: dist_utils.clip_grad_norm_(..., training.max_norm, "
        "foreach=True), max_norm default 1.0 (torchtitan/config/configs.py): torch.nn.utils."
        "get_total_norm (_foreach_norm) and clip_grads_with_norm_ (_foreach_mul_ by the "
        "clamped coefficient, every step)",
    ),
    "grad_zeroing": Setting(
        True,
        "torchtitan/trainer.py train_step: self.optimizers.zero_grad(set_to_none="
        "self.config.training.disable_cuda_graphs), training.disable_cuda_graphs default False "
        "(torchtitan/config/configs.py): torch.optim.Optimizer.zero_grad(set_to_none=False) "
        "zeroes every gradient in place (torch._foreach_zero_), FSDP2's fp32 shards",
    ),
    "memory_phases": Setting(
        "additive",
        "kept additive although torchtitan runs FSDP2 (torchtitan/distributed/fsdp.py "
        "apply_fsdp_to_decoder): torchtitan logs max_reserved (torchtitan/components/metrics.py "
        "DeviceMemoryMonitor), which is what runs out of memory, and the caching allocator "
        "keeps the loss's freed blocks reserved; 'fsdp2' predicts max_memory_allocated (the "
        "single-GPU FSDP2 steps of bench/results/h100-2026-11-26 within 2 %) but the shared "
        "torchtitan runs' logged reserved peaks 2-13 % low (docs/cost_model.md#fsdp2-phases)",
    ),
    "fsdp_copies": Setting(
        "fsdp2",
        "torchtitan/distributed/fsdp.py apply_fsdp: fully_shard per block with "
        "MixedPrecisionPolicy(param_dtype bf16, reduce_dtype fp32); FSDP2's copies around its "
        "collectives: torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py",
    ),
    "zero3_16bit_shard": Setting(
        False,
        "torchtitan/distributed/fsdp.py fully_shard with MixedPrecisionPolicy(param_dtype "
        "bf16): the sharded parameter stays fp32 and the all-gather's copy-in casts it "
        "(torch/distributed/fsdp/_fully_shard/_fsdp_param.py all-gather inputs)",
    ),
    "zero3_max_reuse_distance": Setting(
        None,
        "torchtitan/distributed/fsdp.py apply_fsdp: each transformer block under the policy's "
        "reshard_after_forward ('default': True without PP), resharded in FSDP2's post_forward "
        "(torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py); only [norm, lm_head] is "
        "kept, 'since FSDP would prefetch them immediately': no reuse-distance rule",
    ),
    "zero3_prefetch_elements": Setting(
        None,
        "FSDP2's implicit prefetch: the next unit's all-gather issued before the current "
        "unit's compute (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py), one unit "
        "ahead",
    ),
    "head_tp_backward": Setting(
        "exposed",
        "torchtitan apply_tp (models/*/infra/parallelize.py): the output layer is "
        "ColwiseParallel(input_layouts=Shard(1)); DTensor keeps the gathered input for the "
        "weight gradient and reduce-scatters the input gradient in the autograd graph, "
        "synchronously, and torch.compile (async TP) covers the transformer blocks only",
    ),
    "step_grad_copies": Setting(
        "none",
        "torch.optim.AdamW steps FSDP2's sharded fp32 parameters with the fp32 gradient shards "
        "the reduce-scatter wrote (MixedPrecisionPolicy reduce_dtype fp32): no copy; its "
        "implementation 'fused' (torchtitan/components/optimizer/optimizer.py default) makes no "
        "foreach intermediates either",
    ),
    "moe_dispatch": Setting(
        "index",
        "torchtitan/models/common/token_dispatcher.py LocalTokenDispatcher (torchtitan 0.3.0): "
        "_local_reorder gathers x_TD[token_indices // top_k], combine multiplies the routed "
        "output in fp32 by the sorted scores and calls torchtitan/ops/scatter_add.py "
        "deterministic_scatter_add (scatter_add under torch.use_deterministic_algorithms, whose "
        "backward is torch.gather of the output gradient)",
    ),
    "ep_dispatch_fp8": Setting(
        False,
        "torchtitan/distributed/deepep/deepep.py get_buffer(use_fp8_dispatch=False) and "
        "hybridep.py (fp8_dispatch=False): the DeepEP paths dispatch the bf16 activations",
    ),
    "moe_host_sync": Setting(
        "expert_parallel",
        "torchtitan/models/common/token_dispatcher.py AllToAllTokenDispatcher: output_splits "
        ".to(cpu, non_blocking=False) ('this would incur a device-to-host sync') before the "
        "all-to-all; LocalTokenDispatcher (no EP) keeps the counts on the device",
    ),
}

_DEEPSPEED_PHYSICS = {
    **_MEGATRON_PHYSICS,
    "attention_kernel": Setting(
        "fa2",
        "Megatron-DeepSpeed (deepspeedai/Megatron-DeepSpeed 4efb479d) megatron/model/"
        "transformer.py FlashSelfAttention: flash-attn 2's flash_attn_varlen_func under "
        "--use-flash-attn-v2, which the deepspeed export passes (planner/export/launch.py); "
        "without a flag the fork runs its unfused CoreAttention (attention_kernel unfused)",
    ),
    "tp_overlap": Setting(
        "collective_matmul",
        "Megatron-DeepSpeed has no Transformer Engine userbuffers (no --tp-comm-overlap)",
    ),
    "selective_recompute": Setting(
        "unfused_attention",
        "Megatron-DeepSpeed megatron/model/transformer.py ParallelAttention: "
        "--recompute-granularity selective sets checkpoint_core_attention only for its unfused "
        "CoreAttention; with flash attention (--use-flash-attn-v1/-v2) it calls "
        "core_attention_flash and checkpoints nothing (the local transformer_impl, which the "
        "export leaves at its default)",
    ),
    "fused_elementwise": Setting(
        True,
        "Megatron-DeepSpeed (a Megatron-LM fork) uses Megatron's fused kernels "
        "(megatron/fused_kernels, apex fused LayerNorm, bias-gelu fusion)",
    ),
    "dp_sync": Setting(
        "deepspeed",
        "deepspeed/runtime/zero/config.py DeepSpeedZeroConfig reduce_bucket_size = 5e8 elements, "
        "reduced from the backward hooks on the reduction stream under overlap_comm "
        "(zero/stage_1_and_2.py reduce_ipg_grads; the export sets it); without ZeRO, "
        "engine.py backward -> allreduce_gradients -> buffered_allreduce_fallback after the "
        "backward, on the compute stream",
    ),
    "dp_accumulation": Setting(
        "zero2_every_micro_batch",
        "deepspeed/runtime/zero/stage_1_and_2.py reduce_ready_partitions_and_remove_grads: "
        "reduces in every backward when partition_gradients (ZeRO-2), only at the "
        "gradient-accumulation boundary otherwise; engine.py allreduce_gradients ('ZeRO stage "
        ">= 2 communicates during non gradient accumulation boundaries as well')",
    ),
    "host_issue": Setting(
        "kernels",
        "Megatron-DeepSpeed's own ColumnParallelLinear / RowParallelLinear (megatron/core/"
        "tensor_parallel/layers.py of the fork, no Transformer Engine by default): one launch "
        "per kernel",
    ),
    "grad_clip": Setting(
        "clip",
        "deepspeed/runtime/constants.py GRADIENT_CLIPPING_DEFAULT 1.0 (DeepSpeed 0.19); "
        "deepspeed/runtime/zero/stage_1_and_2.py step: scaled_global_norm every step while "
        "compute_grad_norm (default True, with gradient_clipping 0 too), then "
        "unscale_and_clip_grads' mul_ by the combined scale; bf16_optimizer.py step: "
        "get_global_norm_of_tensors, clip_tensors_by_global_norm",
    ),
    "grad_zeroing": Setting(
        False,
        "deepspeed/runtime/engine.py _take_model_step -> optimizer.zero_grad(): "
        "zero/stage_1_and_2.py zero_grad(set_to_none=True) sets the 16-bit gradients to None; "
        "the BF16_Optimizer (engine.py _do_optimizer_sanity_check: bf16 under pipeline "
        "parallelism without ZeRO, or ZeRO-1 with grad_accum_dtype fp32) zeroes its flat "
        "gradient buffer in bf16_optimizer.py clear_hp_grads; the profile plans neither "
        "(DEEPSPEED_BF16_PIPELINE, main_grads)",
    ),
    "fsdp_copies": Setting(
        "none",
        "ZeRO 1 / 2 reduce and gather flat contiguous partitions in place (deepspeed/runtime/"
        "zero/stage_1_and_2.py); ZeRO-3's gather copies are not modelled",
    ),
    "main_grads": Setting(
        "bf16",
        "deepspeed/runtime/engine.py get_data_types: without data_types.grad_accum_dtype the "
        "gradients accumulate in the model's 16-bit dtype, and communication_data_type "
        "defaults to it (bf16 under bf16, fp16 under fp16): ZeRO-1/2 keep param.grad and "
        "their averaged_gradients partitions in it (zero/stage_1_and_2.py "
        "gradient_accumulation_dtype) and cast the rank's partition to fp32 only at the step; "
        "ZeRO-3 keeps grad_partitions_flat_buffer in it (zero/stage3.py); ZeRO-0 without "
        "pipelining runs FP16_Optimizer (DDP_BFLOAT16), which flattens the 16-bit gradients "
        "to fp32 at the step (fp16/fused_optimizer.py); 2 B either way. The deepspeed export "
        "writes both fields",
    ),
    "zero3_16bit_shard": Setting(
        True,
        "deepspeed/runtime/zero/stage3.py _create_fp16_partitions_with_defragmentation: the "
        "16-bit partitions of every parameter in lp_param_buffer; _create_fp32_partitions: "
        "their fp32 copies, fp32_partitioned_groups_flat, the optimizer's master",
    ),
    "zero3_max_reuse_distance": Setting(
        1_000_000_000,
        "deepspeed/runtime/zero/config.py max_reuse_distance (stage3_max_reuse_distance) "
        "default 1e9; zero/partitioned_param_coordinator.py __params_to_release keeps every "
        "parameter that recurs in the trace within that many elements. The deepspeed export "
        "writes it",
    ),
    "zero3_prefetch_elements": Setting(
        None,
        "deepspeed/runtime/zero/config.py prefetch_bucket_size (stage3_prefetch_bucket_size) "
        "5e7 elements per module fetch, priced by memory.deepspeed_gathered_elements "
        "(DEEPSPEED_PREFETCH_BUCKET_ELEMENTS, written by the export); this field is "
        "Megatron-FSDP's unit knob",
    ),
    "head_tp_backward": Setting(
        "overlapped",
        "Megatron-DeepSpeed megatron/core/tensor_parallel/layers.py "
        "LinearWithGradAccumulationAndAsyncCommunication.backward: Megatron's async all-gather "
        "and reduce-scatter (all-reduce) beside the dgrad and wgrad GEMMs",
    ),
    "step_grad_copies": Setting(
        "deepspeed",
        "fp16/fused_optimizer.py FP16_Optimizer.step (ZeRO-0): _flatten_dense_tensors over every "
        "`p.grad.to(fp32)` before `p.grad = None`; zero/stage_1_and_2.py step: "
        "free_grad_in_param_list(params_not_in_partition), then the partition's flatten and "
        "`.to(fp32)`; zero/stage3.py _prepare_fp32_grad_for_sub_group: the same per sub-group",
    ),
}
"""Megatron-DeepSpeed is a Megatron-LM fork: its kernels are Megatron's. Its flash attention is
opt-in (--use-flash-attn-v2): the profile prices FlashAttention-2 and its export passes the flag
(before 2026-11-28 the profile priced the fused class while the export launched the unfused
CoreAttention, with its seq x seq scores in memory)."""

_LLM_FOUNDRY_PHYSICS = {
    **_MEGATRON_PHYSICS,
    "tp_overlap": Setting(
        "collective_matmul", "llm-foundry has no tensor-parallel communication overlap"
    ),
    "cross_entropy": Setting(
        "flash_attn",
        "llmfoundry/models/mpt/modeling_mpt.py ComposerMPTCausalLM (commits b2a43a147 and "
        "5e85bd62d, the benchmark tables'): loss_fn defaults to 'fused_crossentropy', "
        "flash_attn.losses.cross_entropy.CrossEntropyLoss(ignore_index=-100) (setup.py pins "
        "flash-attn 1.0.9 with its xentropy kernel), which the benchmark yamls "
        "(scripts/train/yamls/pretrain/mpt-*.yaml) do not change",
    ),
    "attention_kernel": Setting(
        "fa2",
        "llm-foundry MPT attn_impl 'flash' (llmfoundry/models/layers/attention.py "
        "flash_attn_fn) calls the flash-attn 2 package",
    ),
    "attention_unpad": Setting(
        True,
        "llmfoundry/models/layers/attention.py flash_attn_fn (commit 5e85bd62d, the H100 "
        "benchmark table's; the same on main) wraps flash_attn_varlen_func in flash-attn's "
        "bert_padding: unpad_input / index_first_axis gathers q, k, v and pad_input scatters the "
        "output back, whether or not the batch has padding",
    ),
    "dp_sync": Setting(
        "fsdp",
        "llmfoundry/models/mpt/modeling_mpt.py fsdp_wrap_fn: isinstance(module, MPTBlock), one "
        "PyTorch FSDP unit per transformer block, so each block's gradients are one "
        "reduce-scatter",
    ),
    "dp_accumulation": Setting(
        "last_micro_batch",
        "composer/trainer/trainer.py: ddp_sync_strategy defaults to SINGLE_AUTO_SYNC (without "
        "find_unused_parameters), and ddp_sync_context runs every micro-batch but the final one "
        "under model.no_sync()",
    ),
    "grad_clip": Setting(
        "clip",
        "llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml algorithms.gradient_clipping "
        "clipping_type norm, clipping_threshold 1.0 (Composer GradientClipping -> FSDP "
        "clip_grad_norm_: the norm and a scale pass)",
    ),
    "host_issue": Setting(
        "kernels",
        "llmfoundry/models/mpt/modeling_mpt.py MPTBlock: torch.nn.Linear / LayerNorm modules "
        "(Transformer Engine only with precision amp_fp8): one launch per kernel",
    ),
    "grad_zeroing": Setting(
        False,
        "composer/trainer/trainer.py _train_microbatches: optimizer.zero_grad(set_to_none=True) "
        "before each batch (composer 6405188, 2026-04): the gradients are freed, not zeroed",
    ),
    "fsdp_copies": Setting(
        "none",
        "PyTorch FSDP1 FlatParameter: the unsharded parameters are views of the all-gather "
        "output and the flat gradient is reduce-scattered as it is (no FSDP2 copy-out or "
        "chunk_cat); its shard cast is not modelled",
    ),
    "zero3_16bit_shard": Setting(
        False,
        "PyTorch FSDP1 MixedPrecision (Composer's DEFAULT / PURE): the FlatParameter's shard "
        "stays fp32 (_local_shard) and the 16-bit copy is made for the all-gather "
        "(_mp_shard, freed after it)",
    ),
    "zero3_max_reuse_distance": Setting(
        None,
        "PyTorch FSDP1 FULL_SHARD: _post_forward reshards each FlatParameter after its forward "
        "(torch/distributed/fsdp/_runtime_utils.py _post_forward -> _reshard)",
    ),
    "zero3_prefetch_elements": Setting(
        None,
        "PyTorch FSDP1 backward_prefetch BACKWARD_PRE (Composer's default) and forward_prefetch: "
        "the next FlatParameter only (torch/distributed/fsdp/_runtime_utils.py _prefetch_handle)",
    ),
    "head_tp_backward": Setting(
        "exposed",
        "llm-foundry trains MPT without tensor parallelism (Composer FSDP over one data-parallel "
        "axis): no head collectives to overlap",
    ),
    "step_grad_copies": Setting(
        "none",
        "PyTorch FSDP1 under Composer's mixed precision keeps fp32 sharded FlatParameters, and "
        "the optimizer steps their fp32 gradient shards: no copy",
    ),
}

_OTHER_PHYSICS = {
    **_MEGATRON_PHYSICS,
    "tp_overlap": Setting(
        "collective_matmul",
        "an in-house framework: its TP overlap is not public, priced as the generic "
        "collective-matmul decomposition",
    ),
    "ep_dispatch_fp8": Setting(
        True,
        "DeepSeek's HAI-LLM (DeepSeek-V3 report sec. 3.3.2; DeepEP README 'FP8 dispatching, and "
        "BF16 combining'): an fp8 run dispatches fp8 with 1x128 scales",
    ),
    "host_issue": Setting(
        "kernels",
        "an in-house framework (Meta's Llama 3 stack, DeepSeek's HAI-LLM): its module code is not "
        "public, so only the kernels' launch cost is priced",
    ),
}

_NO_OVERLAP = Setting(False, "off unless the run asks for it (workload/layout field)")

# ------------------------------------------------------------------------------------ profiles

MEGATRON = FrameworkProfile(
    name="megatron",
    version="megatron-core 0.19 (Megatron-LM core_r0.19.0)",
    rank_orders=((TP, CP, DP, PP), (TP, CP, PP, DP)),
    moe_rank_orders=((TP, CP, DP, PP),),
    orders_source=(
        "megatron/training/initialize.py _initialize_distributed: order 'tp-cp-ep-dp-pp', or "
        "'tp-cp-ep-pp-dp' with --use-tp-pp-dp-mapping; megatron/core/parallel_state.py "
        "initialize_model_parallel asserts that an order not ending in pp has expert data "
        "parallel == data parallel, so MoE plans keep tp-cp-dp-pp"
    ),
    zero_stages=(0, 1, 2, 3),
    zero_source=(
        "0: DDP; 1: --use-distributed-optimizer; 2 / 3: Megatron-FSDP --use-megatron-fsdp "
        "--data-parallel-sharding-strategy optim_grads / optim_grads_params "
        "(megatron/training/arguments.py)"
    ),
    recompute=("none", "selective", "full"),
    max_vp=None,
    max_cp=None,
    max_ep=None,
    schedules="1F1B, interleaved 1F1B (megatron/core/pipeline_parallel/schedules.py)",
    physics=_MEGATRON_PHYSICS,
    tp_comm_overlap=Setting(
        False, "megatron/core/model_parallel_config.py tp_comm_overlap: bool = False"
    ),
    ep_overlap=True,
    zero_inputs=(
        ("optimizer_moments", 1, "--use-precision-aware-optimizer runs only with the "
         "distributed optimizer (megatron-core 0.19.2 optimizer/optimizer_config.py "
         "__post_init__: '--use-precision-aware-optimizer only supported with distributed "
         "optimizer'), which ZeRO-1 is and Megatron-FSDP (ZeRO-2 / 3) turns on "
         "(megatron/training/arguments.py validate_args: use_megatron_fsdp sets "
         "use_distributed_optimizer)"),
    ),
    sliding_window=(
        "any model: --window-size W-1,0 and --window-attn-skip-freq N (one full layer after N-1 "
        "windowed) or a per-layer list (megatron/training/arguments.py moe_freq_type; "
        "megatron/core/transformer/utils.py is_layer_window_attention)"
    ),
)

TORCHTITAN = FrameworkProfile(
    name="torchtitan",
    version="torchtitan 0.3.0 (also main)",
    rank_orders=((TP, CP, DP, PP),),
    moe_rank_orders=((TP, CP, DP, PP),),
    orders_source=(
        "torchtitan/distributed/parallel_dims.py ParallelDims.build_mesh unflattens the world "
        "as (pp, dp_replicate, dp_shard, cp, tp): tp innermost, pp outermost"
    ),
    zero_stages=(0, 2, 3),
    zero_source=(
        "0: DDP (data_parallel_replicate_degree = dp); 2: FSDP2 fully_shard with "
        "fsdp_reshard_after_forward 'never'; 3: 'always' (torchtitan/distributed/fsdp.py); "
        "torchtitan has no ZeRO-1 (optimizer-only sharding)"
    ),
    recompute=("none", "selective", "full"),
    max_vp=None,
    max_cp=None,
    max_ep=None,
    schedules="1F1B, Interleaved1F1B (torch.distributed.pipelining)",
    physics=_TORCHTITAN_PHYSICS,
    tp_comm_overlap=Setting(
        False, "torchtitan parallelism.enable_async_tensor_parallel defaults to False"
    ),
    hsdp=True,
    recompute_knobs=(
        "torchtitan 0.3.0 distributed/activation_checkpoint.py has FullAC (every block) and "
        "SelectiveAC (its op-level policy) per transformer block, no module list, method or "
        "layer count"
    ),
    experts_follow_tp=(
        "torchtitan 0.3.0 models/common/moe_sharding.py set_moe_sharding_config: with EP "
        "disabled and TP enabled the routed experts' weights take the dense {TP} placement "
        "(w1 / w3 Shard(1), w2 Shard(2)) and the MoE block's input is replicated over TP (an "
        "all-gather of the sequence-parallel tokens, a reduce-scatter of the output); with EP "
        "the experts are not TP-split (ExpertParallel: etp 1). No config field sets it"
    ),
    limits_source=(
        "HSDP: data_parallel_replicate_degree x data_parallel_shard_degree "
        "(torchtitan/distributed/parallel_dims.py), FSDP2 over a 2-D mesh"
    ),
    no_inputs=(
        ("main_grads", "torchtitan 0.3.0 reduces gradients in fp32 only (training."
         "mixed_precision_reduce: Literal['float32'], torchtitan/config/configs.py) and FSDP2 "
         "keeps the sharded gradients in the parameters' fp32"),
        ("fp8_params", "torchtitan 0.3.0 keeps fp32 sharded weights; its float8 converter "
         "(torchtitan/components/quantization/float8.py) has no fp8 primary-weight option"),
        ("cpu_offload_layers", "torchtitan 0.3.0 has no activation offloading (its "
         "enable_cpu_offload is FSDP's parameter/gradient/optimizer offload)"),
        ("optimizer_moments", "torchtitan 0.3.0 builds torch.optim Adam / AdamW "
         "(torchtitan/components/optimizer/optimizer.py), whose moments take the fp32 sharded "
         "parameters' dtype: no bf16 moment option"),
        ("activation_func_fp8_input_store", "a Megatron-Core option (fused_bias_swiglu.py); "
         "torchtitan 0.3.0's float8 converter has no SwiGLU input store"),
        ("attention_output_store", "a Megatron-Core / Transformer Engine option; torchtitan "
         "0.3.0 has no attention-output cache setting"),
        ("cp_attention", "Transformer Engine's all-to-all CP (Megatron --cp-comm-type a2a); "
         "torchtitan 0.3.0's context parallelism is PyTorch's ring (context_parallel)"),
        ("moe_capacity_factor", "torchtitan 0.3.0's MoE routes dropless: its token-choice "
         "router (torchtitan/models/common/moe.py TokenChoiceTopKRouter) has no per-expert "
         "capacity; the HybridEP dispatcher's non_blocking_capacity_factor sizes a dispatch "
         "buffer (torchtitan/overrides/moe_token_dispatcher.py), not Megatron's per-expert drop"),
        ("moe_pad_to_capacity", "torchtitan 0.3.0 has no expert-capacity padding (a "
         "Megatron --moe-pad-expert-input-to-capacity option)"),
    ),
    sliding_window=(
        "only as the model of a recipe that has it (torchtitan/models/gpt_oss: a 128-token "
        "window on even layers); the model is the recipe's, not a command-line field"
    ),
)

DEEPSPEED = FrameworkProfile(
    name="deepspeed",
    version="DeepSpeed 0.19 with Megatron-DeepSpeed",
    rank_orders=((TP, CP, DP, PP),),
    moe_rank_orders=((TP, CP, DP, PP),),
    orders_source=(
        "deepspeed/runtime/pipe/topology.py PipeModelDataParallelTopology: axes "
        "['pipe', 'data', 'model'], the last varying fastest: tp innermost, then dp, then pp"
    ),
    zero_stages=(0, 1, 2, 3),
    zero_source=(
        "deepspeed/runtime/zero/config.py stage 0-3; deepspeed/runtime/pipe/engine.py "
        "PipelineEngine asserts ZeRO stage < 2 with pipeline parallelism"
    ),
    recompute=("none", "selective", "full"),
    max_vp=1,
    max_cp=1,
    max_ep=1,
    schedules="1F1B only (deepspeed/runtime/pipe/schedule.py TrainSchedule)",
    physics=_DEEPSPEED_PHYSICS,
    recompute_knobs=(
        "Megatron-DeepSpeed has no --recompute-modules (selective checkpoints the core "
        "attention: megatron/model/transformer.py), and its DeepSpeed activation checkpointing "
        "(--checkpoint-activations, which the export writes) checkpoints every layer "
        "(checkpoint_num_layers 1; megatron/model/gpt_model.py: 'deepspeed's pipeline doesn't "
        "support the block recompute method')"
    ),
    tp_comm_overlap=_NO_OVERLAP,
    limits_source=(
        "no interleaved schedule in PipelineEngine; Megatron-DeepSpeed's sequence parallelism "
        "is Ulysses all-to-all, not ring CP; DeepSpeed-MoE expert groups are not modelled here"
    ),
    moe=False,
    no_inputs=(
        ("main_grads", "the deepspeed profile prices DeepSpeed's default 16-bit gradients "
         "(main_grads bf16); with data_types.grad_accum_dtype fp32 its engine refuses ZeRO-0 "
         "('unsupported mix of model_dtype and grad_accum_dtype') and runs bf16 ZeRO-1 on "
         "BF16_Optimizer, a full fp32 gradient buffer beside the bf16 gradients "
         "(deepspeed/runtime/engine.py _do_optimizer_sanity_check, bf16_optimizer.py), "
         "which the profile does not price"),
        ("fp8_params", "DeepSpeed with Megatron-DeepSpeed has no fp8 primary weights"),
        ("cpu_offload_layers", "DeepSpeed's activation_checkpointing.cpu_checkpointing moves "
         "recompute checkpoints, not Megatron's per-layer offload without recompute"),
        ("optimizer_moments", "the deepspeed profile prices fp32 Adam moments only (its "
         "export writes no optimizer state dtype)"),
        ("activation_func_fp8_input_store", "a Megatron-Core option (fused_bias_swiglu.py) "
         "that the deepspeed profile's Megatron-DeepSpeed does not have"),
        ("attention_output_store", "a Megatron-Core / Transformer Engine option that the "
         "deepspeed profile's Megatron-DeepSpeed does not have"),
        ("cp_attention", "Transformer Engine's all-to-all CP (Megatron --cp-comm-type a2a); the "
         "deepspeed profile models no context parallelism"),
    ),
)

LLM_FOUNDRY = FrameworkProfile(
    name="llm-foundry",
    version="llm-foundry (Composer + PyTorch FSDP), validation only",
    rank_orders=((TP, CP, DP, PP),),
    moe_rank_orders=((TP, CP, DP, PP),),
    orders_source="Composer FSDP: one data-parallel axis",
    zero_stages=(0, 1, 2, 3),
    zero_source="PyTorch FSDP sharding strategies",
    recompute=("none", "selective", "full"),
    max_vp=1,
    max_cp=1,
    max_ep=1,
    schedules="no pipeline",
    physics=_LLM_FOUNDRY_PHYSICS,
    tp_comm_overlap=_NO_OVERLAP,
    exportable=False,
)

OTHER = FrameworkProfile(
    name="other",
    version="an in-house framework (validation only): the cost model's Megatron-class defaults",
    rank_orders=MEGATRON.rank_orders,
    moe_rank_orders=MEGATRON.moe_rank_orders,
    orders_source="unknown: as Megatron",
    zero_stages=(0, 1, 2, 3),
    zero_source="unknown",
    recompute=("none", "selective", "full"),
    max_vp=None,
    max_cp=None,
    max_ep=None,
    schedules="unknown",
    physics=_OTHER_PHYSICS,
    tp_comm_overlap=_NO_OVERLAP,
    exportable=False,
    dualpipe=True,  # DeepSeek-V3 (HAI-LLM) trained with it
    ep_overlap=True,
)

PROFILES: dict[str, FrameworkProfile] = {
    "megatron": MEGATRON,
    "torchtitan": TORCHTITAN,
    "deepspeed": DEEPSPEED,
}

RECORD_FRAMEWORKS: dict[str, FrameworkProfile] = {
    "megatron": MEGATRON,
    "torchtitan": TORCHTITAN,
    "deepspeed": DEEPSPEED,
    "megatron-deepspeed": DEEPSPEED,
    "llm-foundry": LLM_FOUNDRY,
    "other": OTHER,
}
"""The `framework` values of shared/data/published_runs.yaml and the profile each is scored with."""


def profile(name: str) -> FrameworkProfile:
    """The planning profile `name` (megatron, torchtitan, deepspeed)."""
    found = PROFILES.get(name)
    if found is None:
        raise InvalidInput(f"framework: unknown {name!r}; choose one of {', '.join(FRAMEWORKS)}")
    return found


def record_profile(name: Any) -> FrameworkProfile:
    """The profile a published run's `framework` field names."""
    found = RECORD_FRAMEWORKS.get(str(name))
    if found is None:
        raise InvalidInput(
            f"framework: unknown {name!r}; choose one of {', '.join(RECORD_FRAMEWORKS)}"
        )
    return found


def profile_violations(
    p: FrameworkProfile, model: ModelSpec, layout: Layout, chunks: list[int] | None = None
) -> list[str]:
    """Why `p`'s framework cannot run `layout` (empty: it can). `chunks`: layers per virtual
    stage when the plan has its own split (Estimate.layers_per_stage)."""
    out = []
    if model.moe is not None and not p.moe:
        out.append(f"{p.name}: mixture-of-experts layers are not modelled ({p.limits_source})")
    if layout.order not in p.orders_for(model):
        order = "-".join(a.value for a in layout.order)
        out.append(f"rank order {order} is not one {p.name} builds ({p.orders_source})")
    if layout.zero_stage not in p.zero_stages:
        out.append(f"ZeRO-{layout.zero_stage} is not a {p.name} sharding mode ({p.zero_source})")
    if layout.recompute not in p.recompute:
        out.append(f"recompute {layout.recompute} is not a {p.name} granularity")
    every_layer = layout.recompute_method != "block" and (layout.recompute_num_layers or 1) == 1
    knobs = ["recompute_modules"] if layout.recompute_modules is not None else []
    knobs += [] if every_layer else ["recompute_method / recompute_num_layers"]
    if p.recompute_knobs and knobs:  # uniform groups of one layer: plain full recompute
        out.append(f"{', '.join(knobs)}: {p.name} has no such setting ({p.recompute_knobs})")
    for axis, cap in (("vp", p.max_vp), ("cp", p.max_cp), ("ep", p.max_ep)):
        if cap is not None and getattr(layout, axis) > cap:
            out.append(
                f"{axis} ({getattr(layout, axis)}) > {cap}: {p.limits_source or p.schedules}"
            )
    if layout.dp_shard is not None and (not p.hsdp or layout.zero_stage < 2):
        out.append(f"dp_shard ({layout.dp_shard}): {p.name} has no hybrid sharding here")
    if p.name == "deepspeed" and layout.pp > 1 and layout.zero_stage >= 2:
        out.append(f"ZeRO-{layout.zero_stage} with pp > 1 ({p.zero_source})")
    if layout.pp_schedule == "dualpipe" and not p.dualpipe:
        out.append(f"pipeline schedule dualpipe is not a {p.name} schedule")
    if layout.ep_overlap:
        out += ep_overlap_violations(p, layout)
    overlap = layout.tp_comm_overlap and layout.tp > 1
    if p.name == "megatron" and overlap and not layout.sequence_parallel:
        out.append(
            "tp_comm_overlap without sequence parallelism (megatron/training/arguments.py "
            "validate_args: 'Tensor parallel communication/GEMM overlap can happen only when "
            "sequence parallelism is enabled')"
        )
    if p.name == "torchtitan":
        out += _torchtitan_violations(model, layout, chunks)
    if p.name == "deepspeed" and split_slots(layout) != (0, 0):
        # Megatron-DeepSpeed's GPTModelPipe builds its PipelineModule with
        # partition_method='type:transformer' (megatron/model/gpt_model.py): the embedding and
        # the loss are never counted as layers, and no argument changes the method.
        out.append(
            "account_for_embedding/loss_in_pipeline_split: Megatron-DeepSpeed partitions "
            "transformer layers only (PipelineModule partition_method 'type:transformer')"
        )
    return out


def input_violations(
    p: FrameworkProfile, workload: Workload, cpu_offload_layers: int = 0
) -> list[str]:
    """Why `p`'s launcher cannot run these inputs (FrameworkProfile.no_inputs; empty: it can):
    bf16 main gradients, fp8 primary weights, CPU activation offloading, bf16 optimizer
    moments, the fp8 SwiGLU input store, the E5M6 attention-output cache."""
    given = _stated_inputs(workload, cpu_offload_layers, p)
    return [f"{given[name]}: {why}" for name, why in p.no_inputs if given.get(name)]


def states_zero_inputs(p: FrameworkProfile, workload: Workload) -> bool:
    """Whether the workload states an input of `p`'s ZeRO rules (FrameworkProfile.zero_inputs,
    and DeepSpeed's bf16 optimizer under pipelining): without one, zero_input_violations is
    empty at every stage."""
    if _bf16_pipeline_needs_zero(p, workload):
        return True
    return any(getattr(workload, name) != _DEFAULTS[name] for name, _, _ in p.zero_inputs)


DEEPSPEED_BF16_PIPELINE = (
    "DeepSpeed runs a bf16 model under pipeline parallelism without ZeRO on its BF16_Optimizer "
    "(deepspeed/runtime/engine.py _do_optimizer_sanity_check), which shards the fp32 master "
    "and moments over data parallelism as ZeRO-1 does and keeps a second full gradient buffer "
    "(bf16_optimizer.py fp32_groups_gradients_flat), a layout the profile does not price"
)
"""Why the deepspeed profile plans bf16 with pp > 1 at ZeRO-1, not ZeRO-0."""


def _bf16_pipeline_needs_zero(p: FrameworkProfile, workload: Workload) -> bool:
    """Whether `p` refuses this workload's pipelined layouts below ZeRO-1
    (DEEPSPEED_BF16_PIPELINE): one predicate for states_zero_inputs and zero_input_violations,
    so the search's short cut and the rule cannot disagree."""
    return p.name == "deepspeed" and workload.precision == "bf16"


def zero_input_violations(p: FrameworkProfile, workload: Workload, layout: Layout) -> list[str]:
    """Why `p`'s launcher cannot run these inputs at the layout's ZeRO stage
    (FrameworkProfile.zero_inputs; empty: it can): Megatron's bf16 moments below ZeRO-1;
    DeepSpeed's bf16 under pipelining below ZeRO-1 (DEEPSPEED_BF16_PIPELINE)."""
    out: list[str] = []
    if layout.pp > 1 and layout.zero_stage == 0 and _bf16_pipeline_needs_zero(p, workload):
        out.append(f"precision bf16 with pp > 1 needs ZeRO >= 1 under deepspeed: "
                   f"{DEEPSPEED_BF16_PIPELINE}")
    for name, lowest, why in p.zero_inputs:
        if layout.zero_stage >= lowest or getattr(workload, name) == _DEFAULTS[name]:
            continue  # the common cases, first: the search asks per stage of every base
        stated = _stated_inputs(workload, layout.cpu_offload_layers, p)[name]
        if stated:
            out.append(
                f"{stated} needs ZeRO >= {lowest} under {p.name} (got ZeRO-{layout.zero_stage}): "
                f"{why}"
            )
    return out


_DEFAULTS = {name: f.default for name, f in Workload.model_fields.items()}
"""Each Workload field's default: a zero_inputs field left at it states nothing."""


def _stated_inputs(
    workload: Workload, cpu_offload_layers: int, p: FrameworkProfile | None = None
) -> dict[str, Any]:
    """The memory inputs a workload states, by field name, as the words a refusal names
    (False / 0 where not stated). main_grads is stated where it differs from the dtype `p`'s
    launcher runs (the profile's physics, DeepSpeed's bf16; else the Workload default fp32)
    and the workload set it: a workload the profile has not yet applied keeps fp32 unset."""
    runs = p.physics["main_grads"].value if p is not None and "main_grads" in p.physics else None
    if runs is None:
        grads = workload.main_grads != "fp32"
    else:
        grads = workload.main_grads != runs and "main_grads" in workload.model_fields_set
    return {
        "main_grads": grads and f"main_grads {workload.main_grads}",
        "fp8_params": workload.fp8_params and "fp8_params",
        "cpu_offload_layers": cpu_offload_layers and f"cpu_offload_layers {cpu_offload_layers}",
        "optimizer_moments": (
            workload.optimizer_moments != "fp32"
            and f"optimizer_moments {workload.optimizer_moments}"
        ),
        "activation_func_fp8_input_store": (
            workload.activation_func_fp8_input_store and "activation_func_fp8_input_store"
        ),
        "attention_output_store": (
            workload.attention_output_store != "separate"
            and f"attention_output_store {workload.attention_output_store}"
        ),
        "cp_attention": workload.cp_attention == "a2a" and "cp_attention a2a",
        "moe_capacity_factor": (
            workload.moe_capacity_factor is not None
            and f"moe_capacity_factor {workload.moe_capacity_factor:g}"
        ),
        "moe_pad_to_capacity": workload.moe_pad_to_capacity and "moe_pad_to_capacity",
    }


def ep_overlap_precision_ok(precision: str) -> bool:
    """Megatron asserts `bf16 or fp16` for the all-to-all overlap (transformer_config.py
    __post_init__); fp8 training is a bf16 model with TE's fp8 GEMMs (the export writes --bf16
    --fp8-format ...), so only an fp32 model is refused."""
    return precision in ("bf16", "fp16", "fp8")


def ep_overlap_violations(
    p: FrameworkProfile, layout: Layout, precision: str = "bf16"
) -> list[str]:
    """Why `p` cannot overlap the MoE all-to-all on `layout`: Megatron-LM's own asserts on
    overlap_moe_expert_parallel_comm (megatron/core/transformer/transformer_config.py
    __post_init__): expert parallelism, virtual stages when pp > 1, no full recomputation, no
    recompute method or layer count, no `moe` recompute module, a bf16 or fp16 model."""
    if not p.ep_overlap:
        return [f"MoE all-to-all overlap is not a {p.name} option"]
    out = []
    if layout.ep <= 1:
        out.append("ep_overlap needs expert parallelism (ep > 1)")
    if layout.pp > 1 and layout.vp <= 1:
        out.append("ep_overlap with pp > 1 needs virtual pipeline stages (vp > 1)")
    if layout.recompute == "full" or layout.recompute_method or layout.recompute_num_layers:
        out.append("ep_overlap asserts no full recomputation (no recompute method or layers)")
    if "moe" in (layout.recompute_modules or ()):
        out.append("ep_overlap asserts no 'moe' recompute module")
    if not ep_overlap_precision_ok(precision):
        out.append(f"ep_overlap runs a bf16 or fp16 model only (precision {precision})")
    return out


def torchtitan_dp_degrees(layout: Layout) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree) of a layout: ZeRO-0 is DDP
    over all of dp; ZeRO-2/3 is FSDP2 over dp_shard (all of dp unless HSDP) with the rest
    replicated (torchtitan/distributed/parallel_dims.py)."""
    if layout.zero_stage == 0:
        return layout.dp, 1
    return layout.replicate_dp, layout.shard_dp


def expert_tp(p: FrameworkProfile | None, model: ModelSpec, tp: int, ep: int) -> int:
    """The expert TP (Layout.etp) the search gives a (tp, ep) shape under `p`: tp where the
    launcher splits a MoE model's routed experts over TP at EP 1 (experts_follow_tp:
    torchtitan), else 1 (Megatron's folding with --expert-tensor-parallel-size 1, which its
    export writes; experts whole on each rank, the TP ranks' tokens split among them)."""
    if p is not None and p.experts_follow_tp and model.moe is not None and ep == 1:
        return tp
    return 1


def shard_choices(p: FrameworkProfile | None, layout: Layout) -> list[int | None]:
    """dp_shard values the search tries for a shape: None (shard over all of dp), and with a
    profile that has HSDP and ZeRO >= 2 every proper divisor of dp above 1 (with EP, those
    whose shard mesh holds whole EP groups: efsdp = dp_shard*cp*tp / (ep*etp) whole,
    torchtitan parallel_dims.py build_mesh)."""
    if p is None or not p.hsdp or layout.zero_stage < 2:
        return [None]
    lo = layout
    return [None] + [
        d
        for d in range(2, lo.dp)
        if lo.dp % d == 0 and expert_shard_mesh_whole(d, lo.cp, lo.tp, lo.ep, lo.etp)
    ]


def _torchtitan_violations(model: ModelSpec, layout: Layout, chunks: list[int] | None) -> list[str]:
    out = []
    _, shard = torchtitan_dp_degrees(layout)
    if layout.zero_stage == 0 and layout.cp > 1:
        # build_mesh folds cp into the fsdp axis ("we always assume that when cp is used, FSDP
        # is also applied"): parameters are sharded over cp, not replicated as ZeRO-0 prices.
        out.append("ZeRO-0 with cp > 1: torchtitan shards parameters over cp (FSDP over cp)")
    if layout.ep > 1:
        # parallel_dims.py build_mesh: efsdp = dp_shard * cp * tp // ep must be whole; the
        # MoE layers' EP borrows tp (etp = 1 in torchtitan 0.3's ExpertParallel).
        if (shard * layout.cp * layout.tp) % layout.ep or layout.ep % (layout.cp * layout.tp):
            out.append(
                f"ep ({layout.ep}) must be a multiple of cp*tp ({layout.cp}*{layout.tp}) and "
                f"divide dp_shard*cp*tp ({shard}*{layout.cp}*{layout.tp})"
            )
        if layout.etp != 1:
            out.append(f"etp ({layout.etp}) != 1: torchtitan's expert TP is tp or 1")
    elif model.moe is not None and layout.etp != layout.tp:
        out.append(
            f"etp ({layout.etp}) != tp ({layout.tp}) at ep 1: torchtitan splits the routed "
            "experts over TP whenever EP is off (models/common/moe_sharding.py "
            "set_moe_sharding_config)"
        )
    if layout.pp > 1 and layout.vp > MAX_ACTIVE_STAGES and layout.zero_stage >= 2:
        out.append(
            f"vp ({layout.vp}) > {MAX_ACTIVE_STAGES} with ZeRO-{layout.zero_stage}: "
            "torch.distributed.pipelining keeps at most 3 local stages gathered "
            "(schedules.py _add_unshard_reshard max_active_stages), so evicted chunks gather "
            "again, more all-gathers than the plan is priced with (accumulation.dp_rounds)"
        )
    if layout.pp > 1:
        counts = chunks or layout_chunk_counts(model, layout)
        per_stage = max(counts)
        if len(counts) > 2 and set(counts[1:-1]) != {per_stage}:
            out.append(
                f"layers per virtual stage {counts}: torchtitan's "
                "pipeline_parallel_layers_per_stage is one number (only the first and last "
                "stage may hold fewer)"
            )
    return out
