"""Bad input on the last stop's inputs (bf16 main gradients, fp8 primary weights, CPU activation
offloading): one line naming the flag, field and rule, exit 2, and JSON that says the input was
used (notes: /work/notes/edges.md)."""

from __future__ import annotations

import json

import factories
import pytest

from cost_models import estimate
from cost_models.errors import InvalidInput
from cost_models.specs import Layout
from planner import api
from planner.cli import main
from planner.export.launch import deepspeed_config, torchtitan_parallelism
from planner.validate import validate_record

EST = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
EST += ["--global-batch", "16", "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "8"]


def _error(capsys, argv: list[str]) -> dict:
    """Run `argv --json`: exit 2, one stderr line, the CONTRACT.md error object."""
    assert main([*argv, "--json"]) == 2
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and len(cap.err.strip().splitlines()) == 1
    error = json.loads(cap.out)["error"]
    assert error["exit_code"] == 2 and cap.err.strip() == f"error: {error['message']}"
    return error


@pytest.mark.parametrize(
    ("extra", "flag", "rule"),
    [
        (["--fp8-params"], "--fp8-params", "fp8_params needs precision fp8, mxfp8 or nvfp4 (got bf16)"),
        (["--fp8-params", "--precision", "fp8", "--zero", "0"], "--fp8-params", "ZeRO stage >= 1"),
        (["--cpu-offload-layers", "32"], "--cpu-offload-layers", "must be below num_layers (32)"),
        (["--cpu-offload-layers", "4", "--pp", "2", "--dp", "4"], "--cpu-offload-layers",
         "needs pp 1"),
        (["--cpu-offload-layers", "4", "--recompute", "full"], "--cpu-offload-layers",
         "needs recompute none"),
        (["--recompute-modules", "core_attn"], "--recompute-modules", "needs recompute: selective"),
        (["--recompute-num-layers", "2"], "--recompute-num-layers", "need recompute: full"),
    ],
)
def test_rules_on_flags_name_the_flag(capsys, extra, flag, rule) -> None:
    error = _error(capsys, [*EST, *extra])
    assert error["field"] == flag
    assert error["message"].startswith(f"{flag}: ") and rule in error["message"]
    assert "(top level)" not in error["message"]


@pytest.mark.parametrize(
    ("extra", "flag", "why"),
    [
        (["--main-grads", "bf16", "--framework", "torchtitan", "--zero", "3"], "--main-grads",
         "mixed_precision_reduce"),
        (["--precision", "fp8", "--fp8-params", "--framework", "torchtitan", "--zero", "3"],
         "--fp8-params", "fp8 primary-weight"),
        (["--cpu-offload-layers", "4", "--framework", "torchtitan", "--zero", "3"],
         "--cpu-offload-layers", "no activation offloading"),
        (["--main-grads", "fp32", "--framework", "deepspeed"], "--main-grads", "grad_accum_dtype"),
        (["--precision", "fp8", "--fp8-params", "--framework", "deepspeed"], "--fp8-params",
         "no fp8 primary weights"),
        (["--cpu-offload-layers", "4", "--framework", "deepspeed"], "--cpu-offload-layers",
         "cpu_checkpointing"),
    ],
)
def test_inputs_a_framework_cannot_run_are_refused(capsys, extra, flag, why) -> None:
    """Was: priced (exit 0) for a framework whose export then refused the plan."""
    error = _error(capsys, [*EST, *extra])
    assert error["field"] == flag and why in error["message"]


def test_plan_refuses_them_for_the_framework_too(capsys) -> None:
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
    argv += ["--global-batch", "16", "--seq-len", "4096", "--framework", "torchtitan"]
    error = _error(capsys, [*argv, "--main-grads", "bf16"])
    assert error["field"] == "--main-grads"


def test_the_library_refuses_them_with_the_same_rule() -> None:
    model, cluster = factories.dense_model(num_layers=4), factories.cluster(8)
    w = factories.workload(1024, 8, main_grads="bf16")
    lo = Layout(dp=8, zero_stage=3)
    with pytest.raises(InvalidInput, match="main_grads bf16: torchtitan"):
        api.estimate(model, cluster, lo, w, framework="torchtitan")
    assert api.estimate(model, cluster, lo, w, framework="megatron").step_time_s > 0


def test_estimate_json_says_which_inputs_were_used(capsys) -> None:
    """Was: the estimate JSON had neither the offloaded layers nor the gradient dtype."""
    assert main([*EST, "--cpu-offload-layers", "4", "--main-grads", "bf16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["layout"]["cpu_offload_layers"] == 4
    assert out["workload"]["main_grads"] == "bf16" and out["workload"]["fp8_params"] is False
    assert main([*EST, "--cpu-offload-layers", "4"]) == 0
    assert "CPU offload of 4 layers' activations" in " ".join(capsys.readouterr().out.split())


def test_plan_json_layout_keeps_every_key(capsys) -> None:
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
    assert main([*argv, "--global-batch", "16", "--seq-len", "4096", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best["layout"]["cpu_offload_layers"] == 0
    assert best["estimate"]["layout"]["cpu_offload_layers"] == 0


def _record(settings: dict) -> dict:
    return factories.tiny_record(settings, num_layers=4, layout={"pp": 1, "dp": 8})


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"cpu_offload_layers": True}, "cpu_offload_layers: Input should be a valid integer"),
        ({"cpu_offload_layers": "4"}, "cpu_offload_layers: Input should be a valid integer"),
        ({"ep_overlap": "false"}, "settings: ep_overlap must be true or false, got 'false'"),
        ({"tp_comm_overlap": "false"}, "settings: tp_comm_overlap must be true or false"),
    ],
)
def test_record_settings_are_not_coerced(settings, words) -> None:
    """Was: `cpu_offload_layers: true` offloaded 1 layer, `ep_overlap: "false"` turned the
    overlap on (bool("false")) and `tp_comm_overlap: "false"` too."""
    row = validate_record(_record(settings))
    assert row.estimate is None and words in row.error


def test_exports_name_only_the_option_the_plan_has() -> None:
    model, cluster = factories.dense_model(num_layers=4), factories.cluster(8)
    w = factories.workload(1024, 8, main_grads="bf16")
    e = estimate(model, cluster, w, Layout(dp=8, zero_stage=3))
    msg = r"cannot export to torchtitan: bf16 main gradients \(main_grads\): no field here$"
    with pytest.raises(InvalidInput, match=msg):
        torchtitan_parallelism(model, w, e)
    # DeepSpeed runs bf16 gradients (its profile's main_grads), written as its own fields
    assert deepspeed_config(w, e, model)["data_types"] == {"grad_accum_dtype": "bf16"}


# ------------------------------------------------------------------ plan takes the inputs


PLAN = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
PLAN += ["--global-batch", "128", "--seq-len", "8192", "--top", "3"]


def test_plan_with_fp8_params_finds_the_sharded_layouts(capsys) -> None:
    """Was: 'no feasible plan ... fp8_params needs a ZeRO stage >= 1' for every model: the
    search checks its rules on one base per shape at the space's first ZeRO stage, 0."""
    assert main([*PLAN, "--precision", "fp8", "--fp8-params", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranked"] and all(p["layout"]["zero_stage"] >= 1 for p in out["ranked"])
    assert out["inputs"]["workload"]["fp8_params"] is True
    error = _error(capsys, [*PLAN, "--precision", "fp8", "--fp8-params", "--zero", "0"])
    assert error["field"] == "--fp8-params" and "allowed ZeRO stages are [0]" in error["message"]


def _host_linked(num_gpus: int):
    cluster = factories.cluster(num_gpus)
    return cluster.model_copy(
        update={"gpu": cluster.gpu.model_copy(update={"host_link_gb_per_s": 63.0})}
    )


def test_plan_offloads_in_every_plan_and_the_engines_agree() -> None:
    """Was: `plan` had no --cpu-offload-layers (unrecognized argument)."""
    model, cluster = factories.dense_model(num_layers=8), _host_linked(16)
    w = factories.workload(4096, 64)
    found = {
        engine: factories.plan(model, cluster, w, cpu_offload_layers=4, engine=engine, top_k=4)
        for engine in ("branch-and-bound", "exhaustive")
    }
    ranked = [e.layout for e in found["branch-and-bound"].ranked]
    assert ranked and all(
        lo.cpu_offload_layers == 4 and lo.pp == 1 and lo.recompute == "none" for lo in ranked
    )
    assert [e.step_time_s for e in found["exhaustive"].ranked] == pytest.approx(
        [e.step_time_s for e in found["branch-and-bound"].ranked]
    )
    plain = factories.plan(model, cluster, w, top_k=1, pp=1, recompute=("none",))
    best = found["branch-and-bound"].ranked[0]
    same = api.estimate(model, cluster, best.layout.with_update({"cpu_offload_layers": 0}), w)
    assert best.peak_memory_gib < same.peak_memory_gib  # the offloaded activations left
    assert plain.ranked[0].layout.cpu_offload_layers == 0


@pytest.mark.parametrize(
    ("extra", "rule"),
    [
        (["--pp", "2"], "needs pp 1 (Megatron: no pipeline parallelism with CPU offloading), and "
         "pp is pinned at 2"),
        (["--recompute", "full", "selective"], "the allowed modes are ['full', 'selective']"),
        (["--cpu-offload-layers", "32"], "cpu_offload_layers (32) must be below num_layers (32)"),
    ],
)
def test_plan_refuses_offload_it_cannot_search(capsys, extra, rule) -> None:
    error = _error(capsys, [*PLAN, "--cpu-offload-layers", "4", *extra])
    assert error["field"] == "--cpu-offload-layers" and rule in error["message"]


def test_plan_refuses_offload_without_a_host_link(capsys) -> None:
    argv = ["plan", "--model", "llama3-8b", "--cluster", "mi300x-roce", "--gpus", "16"]
    error = _error(capsys, [*argv, "--global-batch", "128", "--cpu-offload-layers", "4"])
    assert "gpu mi300x has no host_link_gb_per_s" in error["message"]


def test_offload_is_reported_with_what_it_cost(capsys) -> None:
    """Was: the copies' waits were folded into `compute` without a word (JSON, --explain)."""
    assert main([*EST, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "offload" not in plain
    assert main([*EST, "--cpu-offload-layers", "16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    off = out["offload"]
    assert (off["layers"], off["host_link_gb_per_s"]) == (16, 63.0)  # the H100 preset's PCIe 5
    grown = out["breakdown_s"]["compute"] - plain["breakdown_s"]["compute"]
    assert off["exposed_s"] == pytest.approx(grown) and 0 < off["exposed_s"] < off["host_link_busy_s"]
    assert main([*EST, "--cpu-offload-layers", "16", "--explain"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"copies {off['host_link_busy_s']:.3f} s per step, {off['exposed_s']:.3f} s" in text


def test_library_messages_have_no_pydantic_location() -> None:
    """Was: 'workload: (top level): fp8_params needs precision fp8 ...'."""
    with pytest.raises(InvalidInput, match=r"^workload: fp8_params needs precision fp8"):
        api.make_workload(factories.dense_model(), fp8_params=True)


def test_out_of_memory_advice_under_offload_names_the_offload(capsys) -> None:
    """Was: 'allow full recompute (add full to --recompute) or drop the pins (--pp 1)', knobs
    offloading rules out and a pin the user never gave."""
    argv = ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "8"]
    argv += ["--global-batch", "64", "--seq-len", "8192", "--cpu-offload-layers", "8", "--json"]
    assert main(argv) == 1
    cap = capsys.readouterr()
    message = json.loads(cap.out)["error"]["message"]
    assert "offload more than 8 layers, or drop --cpu-offload-layers" in message
    assert "--recompute" not in message and "--pp 1" not in message


def test_offload_the_host_link_cannot_hide_is_warned(capsys) -> None:
    """31 of 32 layers over PCIe 5: the copies stall the step (the last layers' deadlines are
    right after their own forward; 61 % of the step exposed); 12 layers hide most of them (4 %
    exposed): no warning. (16 layers expose 12 % since the H100 preset prices its kernels on the
    measured tables: the faster compute leaves the copies less to hide behind.)"""
    warned = []
    for k in ("31", "12"):
        assert main([*EST, "--cpu-offload-layers", k, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["offload"]["exposed_s"] > 0.1 * out["step_time_s"]) == (k == "31")
        warned.append([w for w in out["warnings"] if w.startswith("CPU offload copies stall")])
    assert len(warned[0]) == 1 and "cannot keep up with 31 layers" in warned[0][0]
    assert warned[1] == []


def test_assumed_host_links_are_labelled_assumptions() -> None:
    """Was: GB300's host link (GB200's figure, 'assumed' in its own source) and B300's (a Gen5
    host assumed) were listed with basis 'datasheet'."""
    import models_zoo
    from models_zoo import provenance

    def basis(gpu_id: str) -> str:
        rows = provenance.gpu_constants(models_zoo.load_gpu(gpu_id))
        return next(r["basis"] for r in rows if r["constant"] == "host_link_gb_per_s")

    assert [basis(g) for g in ("gb300", "b300", "gb200", "h100-sxm-80gb", "mi300x")] == [
        "assumption", "assumption", "datasheet", "datasheet", "assumption",
    ]  # fmt: skip
