"""CPU activation offloading (Layout.cpu_offload_layers, Megatron --cpu-offloading-num-layers)
by hand: Transformer Engine's DefaultOffloadSynchronizer (transformer_engine/pytorch/
cpu_offload.py) copies layer i's saved activations out after its forward, must finish before
layer L-k+i's forward, reloads it from layer L-1-k+i's backward on and needs it back before
layer i's backward; the GPU's peak keeps the other L-k layers. The copies go over the GPU's host
link (GpuSpec.host_link_gb_per_s) and stall the compute stream only where they are late."""

from __future__ import annotations

import json
from types import SimpleNamespace

import factories
import pytest

import models_zoo
from cost_models import estimate
from cost_models.errors import InvalidInput
from cost_models.memory import layer_activation_bytes
from cost_models.pricer import Pricer
from cost_models.specs import Layout, Workload
from cost_models.stage import offload_exposed_s, offloaded_layers
from cost_models.terms import ByKind
from cost_models.units import GIB
from planner.export.launch import deepspeed_config, megatron_args, torchtitan_parallelism
from planner.validate import RunRecord, record_inputs, validate_record


def _times(fwd_s: float, bwd_s: float) -> ByKind:
    return ByKind(SimpleNamespace(forward_s=fwd_s, backward_s=bwd_s), None)


def test_copies_shorter_than_a_layer_hide() -> None:
    """4 layers, 2 offloaded, forward 1 s, backward 2 s, 0.5 s per copy (1 GB at 2 GB/s): every
    copy ends inside the next layer; the link carries 2 copies out and 2 back."""
    exposed, busy = offload_exposed_s((4, 0), 2, _times(1.0, 2.0), ByKind(1e9, None), 2e9)
    assert exposed == 0.0
    assert busy == pytest.approx(2 * 2 * 0.5)


def test_late_copies_stall_the_compute_stream() -> None:
    """4 layers, 2 offloaded, 1 s per layer each way, copies 2.5 s. Forward: the copy stream
    runs 1 -> 3.5 (layer 0) and 3.5 -> 6 (layer 1); layer 2 (layer 0's deadline, L-k+0) starts
    at 3.5 instead of 2 and layer 3 (layer 1's) at 6 instead of 4.5: 3 s. Backward: layer 1's
    reload is queued before layer 2's backward (L-1-k+1 = 2) and runs 1 -> 3.5, layer 0's before
    layer 1's and runs 3.5 -> 6; layer 1's backward waits 2 -> 3.5, layer 0's 4.5 -> 6: 3 s."""
    exposed, busy = offload_exposed_s((4, 0), 2, _times(1.0, 1.0), ByKind(5e9, None), 2e9)
    assert exposed == pytest.approx(3.0 + 3.0)
    assert busy == pytest.approx(4 * 2.5)


def test_offloading_all_but_one_layer_exposes_every_copy() -> None:
    """k = L - 1: layer i must be on the host before layer i + 1 starts and back before its own
    backward, right after its reload starts: each 3 s copy is waited for in full, both ways."""
    exposed, busy = offload_exposed_s((4, 0), 3, _times(1.0, 1.0), ByKind(3e9, None), 1e9)
    assert exposed == pytest.approx(2 * 3 * 3.0)
    assert busy == pytest.approx(2 * 3 * 3.0)


def test_dense_layers_are_offloaded_first() -> None:
    lo = Layout(cpu_offload_layers=5)
    assert offloaded_layers(lo, (3, 10)) == (3, 2)
    assert offloaded_layers(lo, (8, 0)) == (5, 0)


def test_layout_refuses_what_megatron_refuses() -> None:
    with pytest.raises(ValueError, match="needs pp 1"):
        Layout(pp=2, cpu_offload_layers=1)
    with pytest.raises(ValueError, match="needs recompute none"):
        Layout(recompute="full", cpu_offload_layers=1)


# ----------------------------------------------------------------------- through the Pricer


def _small(gpus: int = 8):
    model = models_zoo.load_model("llama3-8b")
    cluster = models_zoo.load_cluster("dgx-h100", gpus)
    workload = Workload(seq_len=4096, global_batch_seqs=16)
    return model, cluster, workload


def test_offloaded_layers_leave_the_gpu_and_their_copies_are_priced() -> None:
    """Llama 3 8B, DP 8, micro-batch 1, 2 micro-batches: offloading 10 of 32 layers takes 10
    layers' saved activations off the GPU, and the step grows by 2 x the stalls that 10 x
    bytes / 63 GB/s (H100: PCIe Gen5 x16) leave behind the layers' compute."""
    model, cluster, w = _small()
    assert cluster.gpu.host_link_gb_per_s == 63
    base = Layout(dp=8)
    off = base.model_copy(update={"cpu_offload_layers": 10})
    e0, e1 = estimate(model, cluster, w, base), estimate(model, cluster, w, off)
    per_layer = layer_activation_bytes(model, w, base, is_moe=False, recompute="none")
    drop = e0.stage_memory[0].activations_gib - e1.stage_memory[0].activations_gib
    assert drop == pytest.approx(10 * per_layer / GIB)
    pricer = Pricer(model, cluster, w)
    times = pricer.layer_times(off).layers
    exposed, busy = offload_exposed_s((32, 0), 10, times, ByKind(per_layer, None), 63e9)
    assert busy == pytest.approx(2 * 10 * per_layer / 63e9)
    assert pricer.offload_s(off, (32, 0)) == (exposed, busy)
    m = e1.num_microbatches
    assert m == 2
    assert e1.breakdown_s["compute"] == pytest.approx(e0.breakdown_s["compute"] + m * exposed)
    assert e1.step_time_s == pytest.approx(e0.step_time_s + m * exposed)


def test_too_many_layers_and_unknown_host_links_are_refused() -> None:
    model, cluster, w = _small()
    with pytest.raises(InvalidInput, match=r"cpu_offload_layers \(32\) must be below num_layers"):
        estimate(model, cluster, w, Layout(dp=8, cpu_offload_layers=32))
    bare = cluster.model_copy(
        update={"gpu": cluster.gpu.model_copy(update={"host_link_gb_per_s": None})}
    )
    with pytest.raises(InvalidInput, match="has no host_link_gb_per_s"):
        estimate(model, bare, w, Layout(dp=8, cpu_offload_layers=4))


def test_every_gpu_preset_with_a_host_link_cites_it() -> None:
    for gpu_id in ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "gb200", "gb300", "a100-sxm-80gb"):
        gpu = models_zoo.load_gpu(gpu_id)
        assert gpu.host_link_gb_per_s and gpu.host_link_source
    assert models_zoo.load_gpu("gb200").host_link_gb_per_s == 225  # 900 GB/s both ways, 2 GPUs


# ----------------------------------------------------------------------- records, CLI, exports


def _record(settings: dict, pp: int = 1) -> dict:
    layout = {"pp": pp, "dp": 8 // pp, "recompute": None}
    return factories.tiny_record(settings, num_layers=4, layout=layout)


def test_records_state_cpu_offload_layers() -> None:
    _, _, _, lo = record_inputs(RunRecord.model_validate(_record({})).model_dump())
    assert lo.cpu_offload_layers == 0
    rec = RunRecord.model_validate(_record({"cpu_offload_layers": 2})).model_dump()
    assert record_inputs(rec)[3].cpu_offload_layers == 2
    row = validate_record(_record({"cpu_offload_layers": 2}, pp=2))
    assert row.estimate is None and "needs pp 1" in row.error


def test_estimate_flag_and_exports(capsys, tmp_path) -> None:
    from planner.cli import main

    argv = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
    argv += ["--global-batch", "16", "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "8"]
    acts = []
    for extra in ([], ["--cpu-offload-layers", "16"]):
        assert main([*argv, *extra, "--json"]) == 0
        acts.append(json.loads(capsys.readouterr().out)["stage_memory_gib"][0]["activations_gib"])
    assert acts[1] < acts[0]
    assert main([*argv, "--pp", "2", "--dp", "4", "--cpu-offload-layers", "4"]) == 2
    err = capsys.readouterr().err
    assert "needs pp 1" in err and "Traceback" not in err
    model, cluster, w = _small()
    e = estimate(model, cluster, w, Layout(dp=8, cpu_offload_layers=16))
    args = megatron_args(model, w, e)
    assert args[args.index("--cpu-offloading-num-layers") + 1] == "16"
    with pytest.raises(InvalidInput, match="cannot export to torchtitan: CPU activation"):
        torchtitan_parallelism(model, w, e)
    with pytest.raises(InvalidInput, match="cannot export to deepspeed: CPU activation"):
        deepspeed_config(w, e, model)
