"""Transformer Engine userbuffers TP overlap, per GEMM (issue 32 item 4; docs/cost_model.md
"TP overlap per GEMM").

With `tp_comm_overlap` Megatron-LM hands every Transformer Engine Linear of a layer a userbuffers
communicator, one per GEMM name (TE transformer_engine/pytorch/module/base.py initialize_ub):
the forward GEMMs qkv_fprop / fc1_fprop (all-gather of the input) and proj_fprop / fc2_fprop
(reduce-scatter of the output); in backward proj_dgrad / fc2_dgrad (all-gather of the output
gradient), qkv_dgrad / fc1_dgrad (bulk all-gather of the input, for the weight gradient, beside
the data-gradient GEMM) and qkv_wgrad / fc1_wgrad (bulk reduce-scatter of the data gradient
beside the weight-gradient GEMM). Each name runs one method
(TE transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp):

- ring_exchange (CommOverlapP2PBase::split_overlap_ag / split_overlap_rs): the GEMM runs as
  tp GEMMs of M/tp token rows, one per peer's chunk, while the next chunk moves by peer-to-peer
  copy; num_sm SMs (default 1) drive the flags;
- pipeline (CommOverlapBase::split_overlap_rs): the GEMM runs as num_splits GEMMs of N/num_splits
  output columns, each chunk reduce-scattered by a kernel on num_sm SMs while the next computes;
- bulk (CommOverlapBase::bulk_overlap): the whole GEMM beside one collective on num_sm SMs.

set_sm_margin launches the GEMM (every piece) on sm_count - num_sm SMs (CommOverlapCore::
initialize `_math_sms`); without it the communication kernel's SMs are shared while it runs.

The configuration is an explicit input (Workload.tp_overlap): TE's defaults where Megatron-LM is
given no --tp-comm-overlap-cfg (initialize_ub get_default_config: ring_exchange num_sm 1 without
margin; pipeline / bulk num_sm 16, cga 2, set_sm_margin, pipeline num_splits 4), or a
Megatron-Bridge recipe's TransformerLayerTPOverlapCfg (src/megatron/bridge/training/
comm_overlap.py), transcribed below by its name; COLLECTIVE_MATMUL keeps the generic collective-
matmul decomposition (stage.overlapped_tp_s) for launchers without userbuffers (PyTorch async TP).
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .calibration import GenerationCalibration
from .compute import Gemm, gemm_pass_s
from .kernels import EXTRAPOLATED, MEASURED, KernelBook, worst
from .specs import GpuSpec

RING, PIPELINE, BULK = "ring_exchange", "pipeline", "bulk"
COLLECTIVE_MATMUL = "collective_matmul"
TE_DEFAULT = "te_default"
TE1_DEFAULT = "te1_default"


@dataclass(frozen=True)
class UbOverlap:
    """One GEMM's userbuffers overlap (TE initialize_ub's per-name config)."""

    method: str
    num_sm: int
    set_sm_margin: bool
    num_splits: int = 0  # pipeline only: GEMM chunks along N (ring_exchange splits into tp)


_RING = UbOverlap(RING, 1, False)  # TE default, Bridge RingExchangeOverlapCfg(): 1 SM, no margin
_RM = UbOverlap(RING, 1, True)  # Bridge RingExchangeOverlapCfg(num_sm=1, set_sm_margin=True)


def _bulk(num_sm: int, margin: bool = False) -> UbOverlap:
    return UbOverlap(BULK, num_sm, margin)


def _pipe(num_sm: int) -> UbOverlap:
    return UbOverlap(PIPELINE, num_sm, True, 4)


def _layer(
    qkv_dgrad: int, qkv_wgrad: int, fc1_dgrad: int, fc1_wgrad: int, proj: UbOverlap, fc2: UbOverlap
) -> dict[str, UbOverlap]:
    """A Megatron-Bridge TransformerLayerTPOverlapCfg: bulk SMs of the four backward bulk
    overlaps (set_sm_margin False in every Bridge config), ring_exchange (aggregate False) for
    qkv / fc1 fprop and proj / fc2 dgrad, and the two fprop reduce-scatters."""
    return {
        "qkv_fprop": _RING, "fc1_fprop": _RING, "proj_dgrad": _RING, "fc2_dgrad": _RING,
        "proj_fprop": proj, "fc2_fprop": fc2,
        "qkv_dgrad": _bulk(qkv_dgrad), "qkv_wgrad": _bulk(qkv_wgrad),
        "fc1_dgrad": _bulk(fc1_dgrad), "fc1_wgrad": _bulk(fc1_wgrad),
    }  # fmt: skip


# TE transformer_engine/pytorch/module/base.py initialize_ub get_default_config, TE >= 2.0
# (methods: ring_exchange qkv_fprop fc1_fprop proj_dgrad fc2_dgrad; pipeline proj_fprop
# fc2_fprop; bulk qkv_dgrad qkv_wgrad fc1_dgrad fc1_wgrad; num_sm 1 / 16, set_sm_margin for
# non-ring).
_TE2_DEFAULT = {
    **{n: _RING for n in ("qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad")},
    "proj_fprop": _pipe(16),
    "fc2_fprop": _pipe(16),
    **{n: _bulk(16, True) for n in ("qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad")},
}

CONFIGS: dict[str, dict[str, UbOverlap]] = {
    TE_DEFAULT: _TE2_DEFAULT,
    # The same before Transformer Engine 2.0 (v1.5 .. v1.13 base.py initialize_ub: methods, SMs
    # and splits as above, `set_sm_margin` 0 unless a config sets it; TE 2.0, 2025-02, made it
    # `not method == "ring_exchange"`): the communication shares the GEMM's SMs while it runs.
    TE1_DEFAULT: {n: replace(c, set_sm_margin=False) for n, c in _TE2_DEFAULT.items()},
    # Megatron-Bridge src/megatron/bridge/training/comm_overlap.py, every config but the LoRA
    # ones (each definition identical at the containers' commits 5776a6d90 c0b9a0003 cfeddcd94
    # 74695a06d 21d102f5e 8f341b04f 381d0b825 4ab94dfad and at 067f987df); the performance
    # recipes pick them per model, GPU and compute dtype (scripts/performance/configs/
    # <family>/*_llm_pretrain.py `cfg.comm_overlap.tp_comm_overlap_cfg = ...`).
    "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192": _layer(4, 24, 2, 4, _pipe(24), _pipe(16)),
    "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192": _layer(4, 24, 2, 4, _RM, _RM),
    "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192": _layer(16, 24, 2, 4, _pipe(32), _pipe(16)),
    "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192": _layer(4, 24, 2, 4, _RM, _RM),
    "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192": _layer(
        2, 24, 2, 2, _pipe(24), _pipe(8)
    ),
    "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192": _layer(2, 24, 2, 2, _RM, _RM),
    "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192": _layer(
        8, 24, 2, 2, _pipe(32), _pipe(8)
    ),
    "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192": _layer(8, 32, 2, 8, _RM, _RM),
    "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048": _layer(8, 16, 4, 16, _pipe(16), _pipe(24)),
    "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048": _layer(8, 16, 4, 16, _pipe(16), _pipe(24)),
    "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048": _layer(4, 4, 2, 4, _pipe(24), _RM),
    "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048": _layer(4, 4, 2, 4, _RM, _RM),
    "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048": _layer(4, 16, 2, 8, _RM, _RM),
    "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048": _layer(4, 16, 2, 8, _RM, _RM),
    "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096": _layer(8, 32, 2, 8, _RM, _RM),
    "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096": _layer(8, 32, 2, 8, _RM, _pipe(24)),
    "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096": _layer(8, 32, 2, 8, _RM, _RM),
}
TP_OVERLAP_CHOICES = (COLLECTIVE_MATMUL, *CONFIGS)
"""Values of Workload.tp_overlap."""


@dataclass(frozen=True)
class Overlapped:
    """One overlapped collective + GEMM: the exposed communication (and the SMs it takes from
    the GEMM while hidden), the GEMM's extra seconds split into pieces over the whole GEMM, and
    how the pieces were looked up (kernels.STATUSES; `extrapolated` without tables)."""

    exposed_s: float
    gemm_extra_s: float
    status: str


def pieces(cfg: UbOverlap, gemm: Gemm, tp: int, pass_index: int) -> tuple[int, Gemm]:
    """(count, shape) of the GEMM pieces the method runs: ring_exchange tp pieces of M/tp token
    rows (every pass's token dimension is Gemm.m), pipeline num_splits pieces of N/num_splits
    forward output columns, bulk the whole GEMM."""
    if cfg.method == RING and tp > 1:
        return tp, replace(gemm, m=gemm.m / tp)
    if cfg.method == PIPELINE and cfg.num_splits > 1 and pass_index == 0:
        return cfg.num_splits, replace(gemm, n=gemm.n / cfg.num_splits)
    return 1, gemm


def overlap_s(
    cfg: UbOverlap,
    collective_s: float,
    tp: int,
    gemms: list[Gemm],
    pass_index: int,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    fp8: bool,
    book: KernelBook | None,
) -> Overlapped:
    """Price one collective overlapped with its partner GEMM(s) (pass 0 forward TN, 1 data
    gradient NN, 2 weight gradient NT; compute._gemm_passes) under `cfg`.

    GEMM: count x time(piece) from the same kernel tables as every GEMM. Communication: a split
    method cannot hide its first (ring) or last (pipeline) chunk, collective / count; the rest
    hides behind the GEMM and is exposed beyond it. Without set_sm_margin the communication's
    num_sm SMs are not the GEMM's while it runs: + hidden x f / (1 - f), f = num_sm / sm_count
    (calibration.overlap_slowdown_s). With set_sm_margin TE passes sm_count - num_sm to cuBLASLt
    as CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET for every piece (CommOverlapCore::initialize
    `_math_sms`; transformer_engine/common/gemm/cublaslt_gemm.cu sets it when non-zero), and the
    GEMM then runs as on that many SMs for its whole length: measured on one H100 at the Linear
    shapes of GPT-3 175B TP8, Llama 3 70B TP4, Llama 3.1 405B TP8 CP2 and a 7B TP2 (all three
    passes bf16, fp8 forward; bench/measure_sm_carveout.py, bench/results/h100-2026-11-27/
    carveout.csv) a target of 132 - n SMs costs the median shape x1.139 / 1.146 (bf16 / fp8) at
    n = 16 and x1.235 / 1.227 at n = 24, against 132 / (132 - n) = 1.138 and 1.222. So the whole
    GEMM is priced x 1 / (1 - f) and the communication takes nothing more from it.
    """
    whole_s = split_s = 0.0
    statuses = []
    count = 1
    for g in gemms:
        count, piece = pieces(cfg, g, tp, pass_index)
        w, _ = gemm_pass_s(g, pass_index, gpu, cal, fp8, book)
        p, status = gemm_pass_s(piece, pass_index, gpu, cal, fp8, book)
        whole_s += w
        # The split is priced from the tables alone: the efficiency curve's small-dimension
        # roll-off was fitted to whole steps and prices H100 fp8 pieces of M = 512 1.6-1.8x
        # the whole GEMM where they measure 1.10-1.30x (docs/cost_model.md "TP overlap per
        # GEMM"), so a piece outside the tables (EXTRAPOLATED) leaves the GEMM unsplit.
        split_s += w if (count == 1 or status == EXTRAPOLATED) else count * p
        statuses.append(status)
    # A piece runs the same kernel over a share of the tiles, so the split does no less work
    # per wave than the whole GEMM; a table pair that says otherwise (70B FC1 at M = 2048:
    # 4 pieces 8 % faster than M = 8192, where a direct H100 measurement gives 8.5 % slower)
    # is within one shape's measurement noise (bench/results/h100-2026-11-26/README.md, ~5 %).
    split_s = max(split_s, whole_s)
    f = min(cfg.num_sm / cal.sm_count, 0.5)
    if cfg.set_sm_margin:  # the whole GEMM on sm_count - num_sm SMs (docstring)
        split_s /= 1.0 - f
    first = collective_s / count if count > 1 else 0.0
    hidden = min(collective_s - first, split_s)
    exposed = first + max(0.0, collective_s - first - split_s)
    status = worst(statuses) if statuses else MEASURED
    contention_s = 0.0 if cfg.set_sm_margin else hidden * f / (1.0 - f)
    return Overlapped(exposed + contention_s, split_s - whole_s, status)
