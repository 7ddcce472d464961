"""Round-2 terms: loss memory by cross-entropy kernel, eager elementwise traffic, overlap contention.

Each expected value is computed by hand in the comment next to it.
"""

import pytest
from factories import cluster, dense_model, layout, tiny_record, workload

from cost_models import estimate
from cost_models.calibration import calibration_for, overlap_slowdown_s
from cost_models.calibration import hbm_bytes_per_s
from cost_models.compute import _elementwise_elements, _memory_ops, layer_time, norm_fused
from cost_models.memory import logits_bytes
from cost_models.pricer import Pricer
from cost_models.stage import dp_edge_buckets_s, overlapped_tp_s
from planner.validate import record_inputs


def test_logit_bytes_by_cross_entropy_kernel():
    model = dense_model(vocab_size=1000)
    lo = layout(tp=2, micro_batch=2)
    # 2 x 512 tokens, 500 logits per TP rank: 512,000 logits.
    fused = logits_bytes(model, workload(seq_len=512, cross_entropy="fused"), lo)
    eager = logits_bytes(model, workload(seq_len=512, cross_entropy="eager_fp32"), lo)
    assert fused == pytest.approx(512_000 * 6)  # bf16 logits + fp32 softmax
    # tp > 1: torchtitan's loss_parallel backward holds x, zeros_like(x), their sum with exp(x)
    # and the product with grad_output: four fp32 tensors per logit.
    assert eager == pytest.approx(512_000 * 16)
    # tp = 1: plain eager F.cross_entropy, fp32 log-softmax + its grad + input grad.
    # 2 x 512 tokens, 1000 logits each: 1,024,000 logits.
    eager_tp1 = logits_bytes(
        model, workload(seq_len=512, cross_entropy="eager_fp32"), layout(micro_batch=2)
    )
    assert eager_tp1 == pytest.approx(1_024_000 * 12)
    # flash-attn's xentropy kernel (llm-foundry's fused_crossentropy): the saved bf16 logits
    # and the bf16 gradient of empty_like(logits)
    flash = logits_bytes(
        model, workload(seq_len=512, cross_entropy="flash_attn"), layout(micro_batch=2)
    )
    assert flash == pytest.approx(1_024_000 * 4)


def test_llm_foundry_prices_its_flash_attn_loss():
    """llm-foundry's MPT takes loss_fn 'fused_crossentropy' by default (flash-attn's
    CrossEntropyLoss), so the profile's loss holds 4 B a logit at its peak, not Megatron's 6."""
    from cost_models import framework

    assert framework.LLM_FOUNDRY.workload(workload()).cross_entropy == "flash_attn"
    assert framework.MEGATRON.workload(workload()).cross_entropy == "fused"


def test_eager_loss_raises_peak_memory_only_on_the_last_stage():
    lo = layout(pp=2, dp=4)
    fused = estimate(dense_model(), cluster(8), workload(), lo)
    eager = estimate(dense_model(), cluster(8), workload(cross_entropy="eager_fp32"), lo)
    assert eager.stage_memory[0] == fused.stage_memory[0]
    assert eager.stage_memory[1].activations_gib > fused.stage_memory[1].activations_gib
    assert eager.step_time_s == fused.step_time_s


def test_eager_elementwise_elements_by_hand():
    # h = 64, ffn 128, 4 heads of 16 (4 KV heads), tp 1, gated: per token
    # fused: norms 2*2*64 + residuals 6*64 + rotary 2*(4+4)*16 + act 3*128 = 256+384+256+384
    # eager: norms 2*18*64 + residuals 6*64 + rotary 10*8*16 + act 5*128 = 2304+384+1280+640
    model = dense_model(
        hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_kv_heads=4, num_layers=2
    )
    lo = layout()
    assert _elementwise_elements(model, lo, 10, False, True) == pytest.approx(10 * 1280)
    assert _elementwise_elements(model, lo, 10, False, False) == pytest.approx(10 * 4608)


def test_eager_run_with_a_fused_norm_kernel_by_hand():
    # torch 2.11: nn.RMSNorm is one aten::_fused_rms_norm kernel even when nothing else is fused.
    # Per token (h 64, as above): norms 2*2*64 = 256 instead of 2*18*64 = 2304; the rest eager:
    # 256 + 384 + 1280 + 640 = 2560
    model = dense_model(
        hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_kv_heads=4, num_layers=2
    )
    lo = layout()
    assert _elementwise_elements(model, lo, 10, False, False, True) == pytest.approx(10 * 2560)
    norm, add, act, rot = _memory_ops(model, lo, False, False, True)
    assert (norm.op, norm.elements, norm.backward) == ("rmsnorm", 256, 2.5)
    chain = _memory_ops(model, lo, False, False, False)[0]
    assert (chain.op, chain.elements, chain.backward) == (None, 2304, 2.0)
    # the other eager ops' backward shares: add 1, SwiGLU 9/5 element moves, rotary 1
    assert (add.backward, act.backward, rot.backward) == (1.0, 1.8, 1.0)
    # a LayerNorm model's eager norm is F.layer_norm, one kernel in every PyTorch
    ln_model = model.model_copy(update={"normalization": "layernorm"})
    eager = workload(fused_elementwise=False)
    assert norm_fused(ln_model, eager) and not norm_fused(model, eager)
    ln = _memory_ops(ln_model, lo, False, False, norm_fused(ln_model, eager))
    assert (ln[0].op, ln[0].elements) == ("layernorm", 256)


def test_per_head_qk_norms_by_hand():
    # qk_norm (Qwen3): two more norm kernels per layer over the rank's query and key heads.
    # h 64, 4 query heads of 16, 2 KV heads, tp 2: query width 2 x 16 = 32, key width 1 x 16 = 16.
    # Fused: 2 elements each: 2 x (32 + 16) = 96 per token more; eager chain 18: 18 x 48 = 864.
    model = dense_model(
        hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_kv_heads=2, num_layers=2
    )
    qk = model.model_copy(update={"qk_norm": True})
    lo = layout(tp=2)
    for fused, extra in ((True, 96), (False, 864)):
        base = _elementwise_elements(model, lo, 10, False, fused)
        assert _elementwise_elements(qk, lo, 10, False, fused) - base == pytest.approx(10 * extra)
    ops = _memory_ops(qk, lo, False, True)
    assert len(ops) == len(_memory_ops(model, lo, False, True)) + 2  # appended: indices kept
    q, k = ops[-2:]
    assert (q.op, q.elements, q.table_elements, k.elements) == ("rmsnorm", 64, 64, 32)
    # priced: the layer's forward elementwise time grows by 96 elements x 2 B per token
    cl, wl = cluster(8), workload(seq_len=512)
    cal = calibration_for(cl.gpu.generation)
    tokens, hbm = 512 * lo.micro_batch, hbm_bytes_per_s(cl.gpu, cal)
    with_qk = layer_time(qk, cl.gpu, cal, wl, lo, is_moe=False).elementwise_s
    without = layer_time(model, cl.gpu, cal, wl, lo, is_moe=False).elementwise_s
    assert with_qk - without == pytest.approx(tokens * 96 * 2 / hbm)


def test_eager_backward_is_counted_per_op_by_hand():
    # no kernel tables: every op at the HBM constant, so backward = sum(share x op bytes) / hbm.
    # Per token (h 64, fused norm, eager rest): norm 256 x 2.5 + adds 384 x 1 + SwiGLU 640 x 1.8
    # + rotary 1280 x 1 = 640 + 384 + 1152 + 1280 = 3456 elements (forward 2560)
    model = dense_model(
        hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_kv_heads=4, num_layers=2
    )
    lo, cl = layout(), cluster(8)
    wl = workload(seq_len=512, fused_elementwise=False, fused_norm=True)
    cal = calibration_for(cl.gpu.generation)
    lt = layer_time(model, cl.gpu, cal, wl, lo, is_moe=False)
    tokens, hbm = 512 * lo.micro_batch, hbm_bytes_per_s(cl.gpu, cal)
    assert lt.elementwise_s == pytest.approx(tokens * 2560 * 2 / hbm)
    assert lt.elementwise_backward_s == pytest.approx(tokens * 3456 * 2 / hbm)
    # the fused path keeps 2x its forward (None)
    fused = layer_time(model, cl.gpu, cal, workload(seq_len=512), lo, is_moe=False)
    assert fused.elementwise_backward_s is None


def test_fused_norm_is_a_record_setting():
    rec = _record("t", "", "torchtitan", {"fused_elementwise": False, "fused_norm": True})
    _m, _c, wl, _lo = record_inputs(rec)
    assert wl.fused_norm and not wl.fused_elementwise
    _m, _c, wl, _lo = record_inputs(_record("t", "", "torchtitan", {"fused_elementwise": False}))
    assert not wl.fused_norm


def test_eager_elementwise_is_slower_and_keeps_the_silu_output():
    lo = layout(dp=8)
    fused = estimate(dense_model(), cluster(8), workload(), lo)
    eager = estimate(dense_model(), cluster(8), workload(fused_elementwise=False), lo)
    assert eager.breakdown_s["compute"] > fused.breakdown_s["compute"]
    # Eager SwiGLU keeps silu's output for the gate multiply's backward (memory._eager_gate_tensors):
    # 32 layers x 4096 tokens x 14336 x 2 B more activations, nothing else in memory moves.
    extra_gib = 32 * 4096 * 14336 * 2 / 2**30
    f, e = fused.stage_memory[0], eager.stage_memory[0]
    assert e.activations_gib - f.activations_gib == pytest.approx(extra_gib, rel=1e-12)
    assert (e.weights_gib, e.gradients_gib, e.optimizer_gib, e.buffers_gib) == (
        f.weights_gib, f.gradients_gib, f.optimizer_gib, f.buffers_gib
    )


def test_overlap_slowdown_by_hand():
    hopper = calibration_for("hopper")
    # 24 of 132 SMs go to NCCL: compute runs at 108/132, 1 s of overlap costs 24/108 s extra.
    assert hopper.comm_sm_fraction == pytest.approx(24 / 132)
    assert overlap_slowdown_s(1.0, hopper) == pytest.approx(24 / 108)
    assert overlap_slowdown_s(0.0, hopper) == 0.0
    assert overlap_slowdown_s(-1.0, hopper) == 0.0


def test_overlapped_collective_with_contention_by_hand():
    # 8 ms in 8 chunks behind a 5 ms GEMM, 20 % of SMs to the collective: first chunk 1 ms,
    # 2 ms not covered, 5 ms hidden slowing the GEMM by 0.2 / 0.8 -> 1.25 ms.
    assert overlapped_tp_s(8e-3, 8, 5e-3, 0.2) == pytest.approx(1e-3 + 2e-3 + 1.25e-3)
    # Still cheaper than not overlapping at all (8 ms).
    assert overlapped_tp_s(8e-3, 8, 50e-3, 0.2) == pytest.approx(1e-3 + 7e-3 * 0.25)


def test_dp_overlap_costs_contention_when_hidden():
    # One node, ZeRO-1: the gradient reduce hides behind backward, yet slows it a little; only
    # the last reduction bucket and the first gather bucket (the embedding's: dense_model's
    # 128,256 x 4,096 is above an even share of its 40M-element buckets) are exposed.
    model, cl, w, lo = dense_model(), cluster(8), workload(), layout(dp=8)
    est = estimate(model, cl, w, lo)
    p = Pricer(model, cl, w)
    sp = p.stage_params(lo, p.stage_counts(lo)[0], 0)
    assert sp.embedding == 128_256 * 4_096 > sp.dense / 200
    last, first = dp_edge_buckets_s(cl, lo, sp, p.spans(lo), None, comm=p.comm)
    assert last > 0 and first > 0
    edges = last + first
    hopper = calibration_for("hopper")
    assert est.breakdown_s["dp_comm"] == pytest.approx(
        edges + overlap_slowdown_s(est.comm_total_s["dp"] - edges, hopper)
    )


def _record(source: str, notes: str, framework: str = "other", settings=None) -> dict:
    """A ZeRO-3 record that leaves every other layout field unstated (FILL_RULES fill them),
    with the given free text, which nothing may read."""
    unstated = dict.fromkeys(
        ("cp", "ep", "vp", "sequence_parallel", "micro_batch", "recompute", "precision")
    )
    return tiny_record(
        settings,
        layout={**unstated, "zero_stage": 3},
        source=source,
        notes=notes,
        framework=framework,
    )


def test_validate_reads_loss_kernel_and_compile_from_the_record():
    """From the record's framework field and explicit settings, never from notes/source text."""
    eager = {"cross_entropy": "eager_fp32", "fused_elementwise": False}
    _, _, old, _ = record_inputs(_record("torchtitan (Dec 2024)", "", "torchtitan", eager))
    assert old.cross_entropy == "eager_fp32" and not old.fused_elementwise
    assert old.attention_kernel == "fa2" and old.pp_keeps_outputs  # the torchtitan profile
    _, _, new, _ = record_inputs(_record("x", "torch.compile off", "torchtitan"))
    assert new.cross_entropy == "fused" and new.fused_elementwise  # notes are not read
    _, _, mcore, _ = record_inputs(_record("torchtitan 2024", "torch.compile off", "megatron"))
    assert mcore.cross_entropy == "fused" and mcore.fused_elementwise
    assert mcore.attention_kernel == "fused" and not mcore.pp_keeps_outputs


def test_fp8_dynamic_scaling_adds_one_amax_read_per_cast_element():
    from cost_models.compute import attention_gemms, layer_time, mlp_gemms

    model, lo = dense_model(), layout(dp=8)
    cal = calibration_for("hopper")
    gpu = cluster(8).gpu
    delayed = layer_time(model, gpu, cal, workload(precision="fp8"), lo, is_moe=False)
    dynamic = layer_time(
        model, gpu, cal, workload(precision="fp8", fp8_dynamic_scaling=True), lo, is_moe=False
    )
    t = 4096  # one sequence of 4096 tokens per micro-batch
    gemms = attention_gemms(model, t, 1) + mlp_gemms(model, t, model.ffn_hidden_size, 1)
    cast_elements = sum(g.m * g.k for g in gemms)  # 4096 * (4096 + 4096 + 4096 + 14336)
    assert cast_elements == 4096 * 26624
    hbm = gpu.hbm_bandwidth_gb_per_s * 1e9 * cal.hbm_efficiency
    assert dynamic.quantize_s - delayed.quantize_s == pytest.approx(2 * cast_elements / hbm)
    # backward quantizes the output gradients [m, n]: 4096 * (6144 + 4096 + 28672 + 4096)
    grad_elements = sum(g.m * g.n for g in gemms)
    assert grad_elements == 4096 * 43008
    assert dynamic.quantize_backward_s - delayed.quantize_backward_s == pytest.approx(
        2 * grad_elements / hbm
    )
    assert dynamic.gemm_s == delayed.gemm_s
    assert dynamic.elementwise_s == delayed.elementwise_s


def test_op_level_selective_recompute_by_hand():
    from cost_models.compute import recomputed_matmuls
    from cost_models.memory import layer_activation_bytes

    # h 4096, 32 heads of 128, 8 KV heads, ffn 14336, tp 1, 4096 tokens. Saved per token:
    # input 4096 + q 4096 + v 1024 + SDPA out 4096 + w1 14336 + w2 4096 = 31744 bf16 elements,
    # plus SDPA's fp32 log-sum-exp, one per head (32 x 4 B).
    model, lo = dense_model(), layout(dp=8, recompute="selective")
    op = workload(selective_recompute="every_other_matmul")
    got = layer_activation_bytes(model, op, lo, is_moe=False, recompute="selective")
    assert got == pytest.approx(4096 * (31744 * 2 + 32 * 4))
    # Recomputed: wk [t,4096]x[4096,1024], wo [t,4096]x[4096,4096], w3 [t,4096]x[4096,14336].
    shapes = [(g.n, g.k) for g in recomputed_matmuls(model, 4096, 1)]
    assert shapes == [(1024, 4096), (4096, 4096), (14336, 4096)]


def test_op_level_selective_on_a_moe_layer_by_hand():
    """torchtitan 0.3.0 SelectiveAC on a MoE block: torch._grouped_mm is in no save list, so
    every routed expert GEMM reruns; the router gate is forced to recompute; the top-k and the
    all-to-all outputs are saved; the shared expert counts on as a dense MLP."""
    from factories import moe_model

    from cost_models.compute import recomputed_moe_matmuls
    from cost_models.memory import layer_activation_bytes

    # h 2048, 16 heads of 128, 4 KV heads; 16 experts, top-2, expert ffn 1024, 1 shared expert.
    model, op = moe_model(), workload(selective_recompute="every_other_matmul")
    lo = layout(dp=8, ep=4, recompute="selective")
    got = recomputed_moe_matmuls(model, 4096, lo, 1.15)
    shapes = [(g.m, g.n, g.k, g.count, g.grouped, g.imbalance) for g in got]
    rows = 4096 * 2 / 4  # 8192 routed rows over the 4 local experts
    assert shapes == [
        (4096, 512, 2048, 1, False, 1.0),  # wk: 4 KV heads of 128
        (4096, 2048, 2048, 1, False, 1.0),  # wo
        (4096, 16, 2048, 1, False, 1.0),  # router gate
        (rows, 2048, 2048, 4, True, 1.15),  # w1 and w3 of the local experts
        (rows, 2048, 1024, 4, True, 1.15),  # w2
        (4096, 1024, 2048, 1, False, 1.0),  # the shared expert's w3
    ]
    # Saved per token (bf16 elements): input 2048 + q 2048 + v 512 + SDPA out 2048, the two
    # all-to-all outputs 2 x (2 x 2048), shared w1 1024 + w2 2048 = 17920; SDPA's fp32 lse (16 x
    # 4 B) and the top-2 scores (fp32) and ids (int64): 2 x 12 B.
    saved = layer_activation_bytes(model, op, lo, is_moe=True, recompute="selective")
    assert saved == pytest.approx(4096 * (17920 * 2 + 16 * 4 + 2 * 12))
    # without EP nothing crosses an all-to-all: the permuted tokens are recomputed too
    no_ep = layout(dp=8, recompute="selective")
    one = layer_activation_bytes(model, op, no_ep, is_moe=True, recompute="selective")
    assert one == pytest.approx(saved - 4096 * 4 * 2048 * 2)
    none = layer_activation_bytes(model, op, lo, is_moe=True, recompute="none")
    assert saved < none


def test_op_level_selective_keeps_recompute_monotone():
    from factories import moe_model

    op = workload(selective_recompute="every_other_matmul")
    cases = [(dense_model(), layout(dp=8)), (dense_model(), layout(tp=8, sequence_parallel=True))]
    cases += [(moe_model(), layout(dp=8, ep=4)), (moe_model(), layout(dp=8))]
    for model, lo in cases:
        mem = [
            estimate(model, cluster(8), op, lo.model_copy(update={"recompute": rc}))
            for rc in ("none", "selective", "full")
        ]
        assert mem[0].peak_memory_gib >= mem[1].peak_memory_gib >= mem[2].peak_memory_gib
        assert mem[0].step_time_s <= mem[1].step_time_s <= mem[2].step_time_s


def test_moe_overhead_per_local_expert_by_hand():
    from factories import moe_model

    from cost_models.compute import layer_overhead_s

    hopper = calibration_for("hopper")
    w = workload()
    # 16 experts over EP 4: 4 local experts x 3 GEMMs per pass x 32 us, plus the fixed 200 us
    # and the per-layer 5 us.
    got = layer_overhead_s(moe_model(), layout(dp=8, ep=4), hopper, w, True)
    assert got == pytest.approx(5e-6 + 200e-6 + 3 * 4 * 32e-6)
    # More EP, fewer local experts, less host time.
    assert layer_overhead_s(moe_model(), layout(dp=8, ep=8), hopper, w, True) < got


def test_last_stage_kept_outputs_by_hand():
    from cost_models.memory import kept_outputs_bytes

    model = dense_model(vocab_size=1000)
    lo = layout(tp=2, pp=4, cp=2, micro_batch=2)
    w = workload(seq_len=512, pp_keeps_outputs=True)
    # 2 x 512 tokens split over CP 2 = 512 tokens per GPU, 500 logits per TP rank, bf16,
    # kept for each of 8 micro-batches: 8 * 512 * 500 * 2 B = 4,096,000 B.
    assert kept_outputs_bytes(model, w, lo, 8) == pytest.approx(4_096_000)
    assert kept_outputs_bytes(model, workload(seq_len=512), lo, 8) == 0.0  # Megatron frees them
    assert kept_outputs_bytes(model, w, layout(tp=2, micro_batch=2), 8) == 0.0  # no pipeline


def test_kept_outputs_raise_only_the_last_stage():
    from cost_models.memory import GIB, kept_outputs_bytes

    model, lo = dense_model(), layout(pp=4, dp=2)
    freed = estimate(model, cluster(8), workload(global_batch=16), lo)
    kept = estimate(model, cluster(8), workload(global_batch=16, pp_keeps_outputs=True), lo)
    assert kept.stage_memory[:3] == freed.stage_memory[:3]
    # 16 sequences / DP 2 = 8 micro-batches of 4096 tokens, 128256 bf16 logits each.
    extra = kept_outputs_bytes(model, workload(pp_keeps_outputs=True), lo, 8)
    assert extra == pytest.approx(8 * 4096 * 128256 * 2)
    delta = kept.stage_memory[3].activations_gib - freed.stage_memory[3].activations_gib
    assert delta == pytest.approx(extra / GIB)
    assert kept.step_time_s == freed.step_time_s


def test_validate_marks_torchtitan_pipelines_as_keeping_outputs():
    _, _, titan, _ = record_inputs(_record("x", "", "torchtitan"))
    _, _, mcore, _ = record_inputs(_record("torchtitan", "", "megatron"))
    assert titan.pp_keeps_outputs and not mcore.pp_keeps_outputs


def test_tp_overlap_all_gathers_take_one_sm_reduce_scatters_24():
    # The collective-matmul decomposition (Workload.tp_overlap collective_matmul; Transformer
    # Engine's per-GEMM userbuffers configurations: test_tp_overlap.py): all-gathers 1 SM,
    # reduce-scatters 24 SMs. Partners in layer order QKV (AG fwd), proj (RS fwd), FC1 (AG fwd),
    # FC2 (RS fwd); backward (2x the forward GEMM) swaps the roles.
    from cost_models.pricer import Pricer
    from cost_models.stage import _tp_layer_s, tp_partner_gemm_s

    model, cl = dense_model(), cluster(8)
    w = workload(tp_overlap="collective_matmul")
    lo = layout(tp=8, sequence_parallel=True, tp_comm_overlap=True)
    p = Pricer(model, cl, w)
    lt = p.layer_times(lo).layers.dense
    span = p.spans(lo)
    exposed, total, _ = _tp_layer_s(model, cl, p.cal, w, lo, lt, span, False)
    per = total / 8  # 2 blocks x 2 passes x (RS + AG)
    ring, rs = 1 / 132, 24 / 132
    partners = tp_partner_gemm_s(model, cl, p.cal, w, lo, lt, 2)
    by_hand = sum(
        overlapped_tp_s(per, 8, g, ring if i % 2 == 0 else rs)
        + overlapped_tp_s(per, 8, 2 * g, rs if i % 2 == 0 else ring)
        for i, g in enumerate(partners)
    )
    assert exposed == pytest.approx(by_hand, rel=1e-12)
    # fewer SMs taken than the old uniform 24-SM charge
    uniform = sum(
        overlapped_tp_s(per, 8, g, rs) + overlapped_tp_s(per, 8, 2 * g, rs) for g in partners
    )
    assert exposed < uniform


def test_op_level_selective_reruns_the_tp_all_gathers_it_does_not_save():
    """torchtitan's SelectiveAC saves reduce_scatter_tensor and all_to_all_single outputs only:
    under sequence parallelism the all-gathers before QKV and FC1 rerun in backward (half an
    RS + AG all-reduce per block), without it the whole all-reduces; Megatron's selective and
    recompute none rerun none."""
    from cost_models.pricer import Pricer
    from cost_models.stage import _tp_layer_s, rerun_tp_collectives

    model, cl = dense_model(), cluster(8)
    op = workload(selective_recompute="every_other_matmul", tp_overlap="collective_matmul")
    sp = layout(tp=8, sequence_parallel=True, recompute="selective")
    no_sp = sp.model_copy(update={"sequence_parallel": False})
    assert rerun_tp_collectives(op, sp) == 0.5 and rerun_tp_collectives(op, no_sp) == 1.0
    assert rerun_tp_collectives(workload(), sp) == 0.0
    assert rerun_tp_collectives(op, sp.model_copy(update={"recompute": "none"})) == 0.0

    def tp(w, lo):
        p = Pricer(model, cl, w)
        lt = p.layer_times(lo).layers.dense
        return _tp_layer_s(model, cl, p.cal, w, lo, lt, p.spans(lo), False)

    none = tp(op, sp.model_copy(update={"recompute": "none"}))
    assert tp(op, sp)[0] == pytest.approx(none[0] * 2.5 / 2, rel=1e-12)  # 2 passes + 1/2
    assert tp(workload(), sp)[0] == pytest.approx(none[0], rel=1e-12)  # Megatron: core_attn
    # under async TP only the rerun all-gathers' partners (QKV, FC1) hide one more gather
    on = sp.model_copy(update={"tp_comm_overlap": True})
    exposed, total, _ = tp(op, on)
    base = tp(op, on.model_copy(update={"recompute": "none"}))
    assert total == pytest.approx(base[1] * 2.5 / 2, rel=1e-12) and exposed > base[0]
