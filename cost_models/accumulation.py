"""How often a stage's data-parallel collectives run over the m micro-batches of one step
(Workload.dp_accumulation), and what the framework keeps between them. One count, used by the
DP time (stage.stage_dp_parts, the bounds, the stage split and placement), the FSDP2 copies and the
memory model (memory.state_bytes). Every rule cites the framework code it was read from."""

from __future__ import annotations

from .specs import Layout

MAX_ACTIVE_STAGES = 3
"""Local pipeline stages torch 2.14's runtime schedules keep unsharded at once
(torch/distributed/pipelining/schedules.py _add_unshard_reshard, max_active_stages=3): with
more model chunks per rank than this, FSDP2 chunks are resharded between their micro-batches
and gathered again, which dp_rounds does not count (the torchtitan profile refuses them)."""


def defers_to_last_backward(layout: Layout, dp_accumulation: str) -> bool:
    """FSDP2 under torch.distributed.pipelining (dp_accumulation 'every_micro_batch' with
    pp > 1, ZeRO 2 / 3: torchtitan 0.3.0). torch 2.14 torch/distributed/pipelining/stage.py
    backward_maybe_with_nosync calls set_is_last_backward(False),
    set_reshard_after_backward(False) and set_requires_gradient_sync(False) on the stage's
    FSDPModule before every backward, the last one included; perform_reduce_grad (the
    schedules' REDUCE_GRAD after the stage's m-th backward, Schedule1F1B / ScheduleGPipe after
    their loops) turns them on and calls each FSDPParamGroup.post_backward: one reduce-scatter
    per step. In between, FSDPParamGroup.post_backward with reduce_grads False keeps the
    parameters unsharded and FSDPParam.to_accumulated_grad_if_needed /
    accumulate_unsharded_grad_if_needed (_fsdp_param.py) hold the unsharded gradients in the
    reduce dtype (torchtitan mixed_precision_reduce: float32 only)."""
    return dp_accumulation == "every_micro_batch" and layout.pp > 1 and layout.zero_stage >= 2


def dp_rounds(
    layout: Layout, m: int, dp_accumulation: str = "last_micro_batch"
) -> tuple[int, int]:
    """(gradient reductions, parameter gathers) one stage (model chunk) runs per step over its
    m micro-batches (Workload.dp_accumulation). A gather counts once per forward or backward it
    serves.

    - FSDP2 under pipelining (defers_to_last_backward): one reduction. ZeRO-2
      (fsdp_reshard_after_forward 'never' / 'default' with PP) gathers once: nothing reshards
      until perform_reduce_grad. ZeRO-3 ('always') reshards after every forward
      (FSDPParamGroup.post_forward) but not after a backward, so a forward right after a
      backward finds its parameters unsharded (FSDPParamGroup.unshard returns when
      is_unsharded) and a backward right after a forward gathers: Schedule1F1B's
      F^w (B F)^(m-w) B^w (w warm-up forwards) and ScheduleGPipe's F^m B^m both make m + 1
      gathers. The interleaved schedules'
      UNSHARD / RESHARD actions (schedules.py _add_unshard_reshard, max_active_stages 3) keep
      up to 3 local stages gathered, so with vp <= 3 the same m + 1 and 1 per chunk (the
      lowered action lists of ScheduleInterleaved1F1B replayed, docs/cost_model.md); with
      vp > MAX_ACTIVE_STAGES evicted chunks gather again: not counted, and refused by the
      torchtitan profile (framework._torchtitan_violations).
    - ZeRO-3 otherwise, every framework (Megatron-FSDP optim_grads_params, DeepSpeed stage3.py,
      FSDP2 without PP): gather before each forward and backward, reduce after each backward:
      (m, 2m).
    - 'every_micro_batch' without pipeline parallelism (torchtitan 0.3.0: trainer.py train_step
      runs forward_backward_step once per gradient-accumulation step and never calls
      set_requires_gradient_sync, so FSDP2's post_backward reduces every micro-batch; with
      reshard_after_backward True the parameters are freed again and the next forward gathers
      them): ZeRO-2 (m, m), ZeRO-0 (m, 0).
    - 'zero2_every_micro_batch': ZeRO-2 reduces every backward and gathers once, after the
      optimizer step (DeepSpeed stage_1_and_2.py reduce_ready_partitions_and_remove_grads with
      partition_gradients; Megatron-FSDP optim_grads: megatron_fsdp.py grad_reduce_every_bprop,
      "For grads shard mode there will actually always be gradient sync happening" (no_sync),
      the model weight buffer not distributed, param_and_grad_buffer.py): (m, 1).
    - otherwise once per step: (1, 1) with ZeRO 1 / 2, (1, 0) with ZeRO-0 (Megatron DDP and
      distributed optimizer: no_sync until the last micro-batch, finalize_model_grads).
    """
    gathers = 0 if layout.zero_stage == 0 else 1
    if defers_to_last_backward(layout, dp_accumulation):
        return 1, m + 1 if layout.zero_stage == 3 else 1
    if layout.zero_stage == 3:
        return m, 2 * m
    if dp_accumulation == "every_micro_batch" and layout.pp == 1:
        return m, gathers * m
    if dp_accumulation == "zero2_every_micro_batch" and layout.zero_stage == 2:
        return m, 1
    return 1, gathers


def grads_sharded_between_micro_batches(layout: Layout, m: int, dp_accumulation: str) -> bool:
    """Whether a ZeRO-2 stage holds only its gradient shard between micro-batches: when every
    backward reduces its gradients (dp_rounds: m reductions) into the sharded buffer
    (Megatron-FSDP is_grad_buffer_distributed, DeepSpeed's partitioned gradients, FSDP2's
    sharded_param.grad) and frees the unsharded ones. With one reduction per step the
    unsharded gradients are accumulated until it (Megatron's grad buffer, FSDP1 no_sync),
    under pipelining even with one micro-batch (defers_to_last_backward)."""
    if defers_to_last_backward(layout, dp_accumulation):
        return False
    return dp_rounds(layout, m, dp_accumulation)[0] == m
