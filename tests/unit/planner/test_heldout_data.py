"""bench/heldout/mbridge_performance_summary.yaml (held-out evaluation data, never fitted) loads and
passes the published_runs.yaml schema, and its layouts keep the table's arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from factories import load_script

from planner.validate import RunRecord, record_inputs, validate_file

HELDOUT = Path(__file__).resolve().parents[3] / "bench" / "heldout" / "mbridge_performance_summary.yaml"

# The cost model refuses this layout, as Megatron-Core would on its stated values: one 25.09
# variant whose parenthesised PP 8 leaves 32 ranks for EP 64 (the table parenthesises PP, VP and GA
# but not EP). (Llama 3.1 405B's PP 16 x VP 8 over 126 layers runs with the embedding and the loss
# counted as layers, the flags its library recipe sets: scored, test_split_flags_from_the_recipe.)
REFUSED = ("etp*ep (1*64) must divide tp*dp*cp (32)",)


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return yaml.safe_load(HELDOUT.read_text())


def test_every_record_passes_the_schema(records: list[dict]) -> None:
    assert len(records) == 227
    assert len({r["id"] for r in records}) == len(records)
    for r in records:
        checked = RunRecord.model_validate(r)
        assert checked.framework == "megatron" and "@067f987df" in checked.source
        assert checked.measured_tokens_per_s_per_gpu > 0
        record_inputs(checked.model_dump())  # model, settings and workload inputs accepted


def test_validate_scores_all_but_the_refused_layouts() -> None:
    rows = validate_file(str(HELDOUT))
    refused = [r for r in rows if r.error is not None]
    assert all(r.error.startswith(REFUSED) for r in refused), [r.error for r in refused]
    assert len(refused) == 1 and len(rows) - len(refused) == 226


def test_split_flags_from_the_recipe(records: list[dict]) -> None:
    """account_for_embedding/loss_in_pipeline_split come from the model's library recipe
    (llama31_405b_pretrain_config, qwen3_235b_a22b_pretrain_config set both) for the rows whose
    performance recipe was read, and only there; PP 16 x VP 8 = 128 chunks over Llama 3.1 405B's
    126 layers needs them (Megatron-Core: 126 + 2 slots divide by 16 and the 8 per rank by 8)."""
    flagged = [r for r in records if r["layout"].get("account_for_embedding_in_pipeline_split")]
    assert len(flagged) == 48
    for r in flagged:
        assert r["layout"]["account_for_loss_in_pipeline_split"] is True
        assert r["model"]["name"] in ("Llama 3.1 405B", "Qwen3-235B-A22B"), r["id"]
        assert "_pretrain_config sets account_for_embedding_in_pipeline_split" in r["notes"]
    deep = [r["id"] for r in flagged if r["layout"]["pp"] * (r["layout"]["vp"] or 1) == 128]
    assert len(deep) == 9 and all("gb200-llama3.1-405b" in i for i in deep)


def test_layout_arithmetic(records: list[dict]) -> None:
    """DP = #GPUs / (TP PP CP) and GA = GBS / (MBS DP) are whole; a table GA that disagrees is
    marked INCONSISTENT with confidence low, not corrected."""
    inconsistent = []
    for r in records:
        lay = r["layout"]
        assert lay["tp"] * lay["pp"] * lay["cp"] * lay["dp"] == r["num_gpus"], r["id"]
        ga, rest = divmod(lay["global_batch_seqs"], lay["micro_batch"] * lay["dp"])
        assert rest == 0 and r["notes"].endswith(f"GA = {ga}"), r["id"]
        if "INCONSISTENT" in r["notes"]:
            assert r["confidence"] == "low"
            inconsistent.append(r["id"])
    assert inconsistent == [
        "mbridge-25.11-gb300-qwen3-235b-a22b-bf16",
        "mbridge-25.11-h100-gpt-oss-120b-bf16",
        "mbridge-25.09-gb200-llama3-70b-mxfp8",
    ]


def test_recipe_settings_name_their_recipe(records: list[dict]) -> None:
    """A setting the page does not state comes from a performance recipe whose layout is the row's;
    the record's notes name it (file and commit)."""
    recipe_keys = {"cuda_graphs", "full_iteration_cuda_graph", "moe_dispatcher", "ep_overlap", "recompute_modules", "cpu_offload_layers"}
    with_recipe = [r for r in records if recipe_keys & set(r.get("settings") or {})]
    assert with_recipe
    for r in with_recipe:
        if "-25.09-" in r["id"]:  # the YAML perf matrix of the 25.09 run (mbridge_recipes.yaml_settings)
            assert "recipe settings: perf matrix " in r["notes"] and "_llm_pretrain.yaml @fa0315ae2" in r["notes"], r["id"]
            continue
        assert "recipe settings: recipe " in r["notes"], r["id"]
        assert "_workload_base_configs.py @" in r["notes"] or "perf_recipes/" in r["notes"], r["id"]


def test_heldout_pairs_stay_within_one_container(records: list[dict]) -> None:
    """bench/heldout_accuracy.py forms validate's layout pairs per container: the same model, GPU
    and batch in two containers never pair, a measured tie (< 2 %) is set aside."""
    heldout = load_script(HELDOUT.parents[1] / "heldout_accuracy.py")
    from planner.validate import layout_pairs, order_of, validate_record

    by_id = {r["id"]: r for r in records}
    pick = ["mbridge-26.04-gb200-llama3-70b-mxfp8", "mbridge-26.04-gb200-llama3-70b-nvfp4",
            "mbridge-26.04-gb200-llama3-70b-fp8",
            "mbridge-26.04.01-gb200-llama3-70b-nvfp4"]  # fmt: skip
    runs = {rid: by_id[rid] for rid in pick}
    # Hand-made tie: 26.04's FP8 row measured 1 % above its MXFP8 row (really 7.6 % below).
    mxfp8 = runs[pick[0]]["measured_tokens_per_s_per_gpu"]
    runs[pick[2]] = {**runs[pick[2]], "measured_tokens_per_s_per_gpu": mxfp8 * 1.01}
    rows = {rid: validate_record(r) for rid, r in runs.items()}
    assert [heldout.container_of(r) for r in runs.values()] == ["26.04"] * 3 + ["26.04.01"]
    pairs = heldout.container_pairs(rows, runs)
    assert [(p.fast.id, p.slow.id, p.tie) for p in pairs] == [
        (pick[1], pick[0], False), (pick[2], pick[0], True), (pick[1], pick[2], False)
    ]  # fmt: skip
    # Without the container key the 26.04.01 NVFP4 row pairs with 26.04's MXFP8 and FP8 rows, and
    # with 26.04's NVFP4 row: 26.04.01's recipe gathers NVFP4 weights (fp4_param_gather), 26.04's not.
    assert runs[pick[3]]["settings"]["fp8_params"] is True and "fp8_params" not in runs[pick[1]]["settings"]
    assert len(layout_pairs(list(rows.values()))) == 6
    assert (order_of(pairs).pairs, order_of(pairs).ties) == (2, 1)
    # The NVFP4 recipe turns TP comm overlap off (llama3_llm_pretrain.py), the MXFP8 one keeps it on.
    assert runs[pick[0]]["settings"]["tp_comm_overlap"] is True
    assert runs[pick[1]]["settings"]["tp_comm_overlap"] is False
    assert heldout.pair_kind(runs[pick[0]], runs[pick[1]]) == "precision + settings"
    assert heldout.pair_kind(runs[pick[0]], runs[pick[2]]) == "precision + layout + settings"
    assert heldout.precisions_of(runs[pick[1]], runs[pick[0]]) == ("mxfp8", "nvfp4")
    assert heldout.precisions_of(runs[pick[1]], runs[pick[3]]) is None


def test_page_footnotes_on_measured_figures_lower_confidence(records: list[dict]) -> None:
    """The page qualifies two measured rows itself (26.06.01 gpt-oss-120b: a cuDNN regression,
    cudnn-frontend#256); the notes carry its words and the rows are not high confidence."""
    footnoted = [r for r in records if "page footnote on the measured figures" in r["notes"]]
    assert sorted(r["id"] for r in footnoted) == [
        "mbridge-26.06.01-gb200-gpt-oss-120b-mxfp8",
        "mbridge-26.06.01-gb300-gpt-oss-120b-mxfp8",
    ]
    assert all(r["confidence"] == "low" and "cudnn-frontend/issues/256" in r["notes"] for r in footnoted)


def _script():
    return load_script(HELDOUT.parents[1] / "heldout_accuracy.py")


def _run(rid: str, gpu: str, tok: float, container: str = "26.04", layers: int = 32, **layout) -> dict:
    return {
        "id": rid,
        "gpu": gpu,
        "num_gpus": 8,
        "source": f"Megatron-Bridge performance summary, NeMo {container} container",
        "model": {"name": f"{gpu} copy", "num_layers": layers},
        "layout": {"tp": 1, "pp": 1, "precision": "fp8", **layout},
        "measured_tokens_per_s_per_gpu": tok,
    }


def test_same_job_on_two_gpus_pairs_one_row_per_side() -> None:
    """bench/heldout_accuracy.py's same-job comparison: rows of one container, model architecture
    (the name aside), precision and fp8 recipe pair across two GPUs; an ambiguous key (two rows on
    one GPU) or another container does not pair. The ratio error is the predicted speed ratio over
    the measured one, by hand: (1,100 / 1,100) / (1,200 / 1,000) - 1 = -16.7 %."""
    heldout = _script()
    runs = {r["id"]: r for r in (
        _run("a", "b200", 1000.0), _run("b", "gb200", 1200.0),  # the pair
        _run("c", "b200", 500.0, container="26.04.01"), _run("d", "gb200", 600.0, container="26.06"),
        _run("e", "b200", 700.0, layers=40), _run("f", "gb200", 700.0, layers=40),
        _run("g", "gb200", 800.0, layers=40, tp=2),  # two GB200 rows of e's job: ambiguous
    )}  # fmt: skip
    pairs = heldout.same_jobs(runs, runs, "b200", "gb200")
    assert pairs == [("a", "b")]
    err = {"a": 10.0, "b": -8.33}
    pred = {"a": 1100.0, "b": 1100.0}
    assert heldout.twin_cells(runs, pairs, err, pred) == "  1  +10.0   -8.3  -16.7"
    assert heldout.same_layout(runs["a"], runs["b"]) and not heldout.same_layout(runs["f"], runs["g"])
    assert heldout.twin_cells(runs, [], err, pred) == "  0"


def _recipes_module():
    return load_script(HELDOUT.parent / "mbridge_recipes.py")


def test_tp_comm_overlap_read_from_recipe_functions_in_order() -> None:
    """The reader follows a recipe function's statements: the library recipe's CommOverlapConfig,
    a replacement CommOverlapConfig, the `False if precision == "nvfp4"` switch; an `if` that
    touches the setting leaves it unread."""
    import ast

    m = _recipes_module()
    src = '''
def llama3_70b_pretrain_config():
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=True, tp_comm_overlap_cfg=ub)
    return cfg
def qwen3_235b_a22b_pretrain_config():
    return cfg
def llama3_70b_pretrain_config_gb200(precision="bf16"):
    cfg = llama3_70b_pretrain_config()
    cfg.comm_overlap.tp_comm_overlap_cfg = ub
    cfg.comm_overlap.tp_comm_overlap = False if precision == "nvfp4" else cfg.comm_overlap.tp_comm_overlap
    return cfg
def llama3_8b_pretrain_config_gb200(precision="bf16"):
    cfg = llama3_70b_pretrain_config()
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=bool(cfg.model.tensor_model_parallel_size > 1))
    return cfg
def qwen3_235b_a22b_pretrain_config_h100(precision="bf16"):
    cfg = qwen3_235b_a22b_pretrain_config()
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)
    return cfg
def qwen3_235b_a22b_pretrain_config_gb200(precision="bf16"):
    cfg = qwen3_235b_a22b_pretrain_config()
    return cfg
def qwen3_30b_a3b_pretrain_config_gb200(precision="bf16"):
    cfg = llama3_70b_pretrain_config()
    if precision == "fp8_mx":
        cfg.comm_overlap.tp_comm_overlap = False
    return cfg
'''
    fns = {n.name: n for n in ast.parse(src).body}
    library = {k: v for k, v in fns.items() if k.endswith("_pretrain_config")}
    assert m._tp_overlap_of(fns["llama3_70b_pretrain_config_gb200"], library, "fp8_cs", 2) is True
    assert m._tp_overlap_of(fns["llama3_70b_pretrain_config_gb200"], library, "nvfp4", 2) is False
    assert m._tp_overlap_of(fns["llama3_8b_pretrain_config_gb200"], library, "fp8_cs", 2) is True
    assert m._tp_overlap_of(fns["llama3_8b_pretrain_config_gb200"], library, "fp8_cs", 1) is False
    assert m._tp_overlap_of(fns["qwen3_235b_a22b_pretrain_config_h100"], library, "fp8_cs", 2) is False
    for name in ("qwen3_235b_a22b_pretrain_config_gb200", "qwen3_30b_a3b_pretrain_config_gb200"):
        with pytest.raises(m.Unread):
            m._tp_overlap_of(fns[name], library, "fp8_mx", 2)


def test_recipe_settings_carry_fp8_current_scaling_and_tp_overlap(records: list[dict]) -> None:
    """Rows whose recipe matched: "FP8" / "FP8-CS" ran the fp8_cs configs (current scaling ->
    fp8_recipe tensorwise); TP > 1 Llama rows carry the recipe function's TP overlap (off for NVFP4)."""
    by_id = {r["id"]: r for r in records}
    fp8 = by_id["mbridge-26.06-gb300-llama3.1-405b-fp8"]
    assert fp8["settings"]["fp8_recipe"] == "tensorwise" and fp8["settings"]["tp_comm_overlap"] is True
    assert "llama31_405b_pretrain_config_gb300" in fp8["notes"]
    assert by_id["mbridge-26.06-gb300-llama3.1-405b-mxfp8"]["settings"]["tp_comm_overlap"] is True
    assert by_id["mbridge-26.06-gb300-llama3.1-405b-nvfp4"]["settings"]["tp_comm_overlap"] is False
    for r in records:
        s = r.get("settings") or {}
        assert "tp_comm_overlap" not in s or r["layout"]["tp"] > 1, r["id"]
        if "tp_comm_overlap" in s or s.get("fp8_recipe") == "tensorwise" and "FP8-CS = current" not in r["notes"]:
            read = "recipe settings: perf matrix " if "-25.09-" in r["id"] else "recipe settings: recipe "
            assert read in r["notes"], r["id"]


def test_25_09_rows_carry_run_scripts_settings(records: list[dict]) -> None:
    """25.09 ran its layouts from YAML perf matrices and set the TP overlap in run_script.py: the
    library recipe's tp_comm_overlap and COMM_OVERLAP_CONFIG_MAP's userbuffers configuration per
    model, GPU and compute dtype (Megatron-Bridge @fa0315ae2)."""
    by_id = {r["id"]: r for r in records}
    h100 = by_id["mbridge-25.09-h100-llama3.1-405b-fp8"]["settings"]
    assert h100 == {"tp_comm_overlap": True, "tp_overlap": "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
                    "main_grads": "bf16", "fp8_params": True}  # fmt: skip
    b200 = by_id["mbridge-25.09-b200-llama3.1-405b-mxfp8"]["settings"]  # MXFP8: compute dtype fp8
    assert b200["tp_overlap"] == "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192"
    # run_script passes its own CommOverlapConfig(tp_comm_overlap=True) to the Qwen3 recipes, no map entry
    assert by_id["mbridge-25.09-h100-qwen3-235b-a22b-fp8-tokendrop"]["settings"]["tp_overlap"] == "te_default"
    assert "tp_comm_overlap" not in (by_id["mbridge-25.09-h100-llama3-8b-fp8"].get("settings") or {})  # TP 1
    # the perf matrix's own fields: Megatron's per-layer CUDA graphs, CPU offload layers
    assert by_id["mbridge-25.09-b200-llama3-8b-fp8"]["settings"] == {"cuda_graphs": True, "main_grads": "bf16",
                                                                      "fp8_params": True}  # fmt: skip
    assert by_id["mbridge-25.09-gb200-llama3-70b-fp8"]["settings"] == {"cpu_offload_layers": 40, "main_grads": "bf16",
                                                                        "fp8_params": True}  # fmt: skip


def test_comm_overlap_map_and_the_25_09_rule_by_hand() -> None:
    import ast

    m = _recipes_module()
    src = """
COMM_OVERLAP_CONFIG_MAP = {
    "llama3_70b": {"h100": {"bf16": ub_bf16_a, "fp8": ub_fp8_a}},
}
"""
    assert m._comm_overlap_map(src) == {"llama3_70b": {"h100": {"bf16": "ub_bf16_a", "fp8": "ub_fp8_a"}}}
    with pytest.raises(m.Unread):
        m._comm_overlap_map("COMM_OVERLAP_CONFIG_MAP = {'x': f()}")
    lib = ast.parse("""
def llama3_70b_pretrain_config(**kw):
    recommended = {"sequence_parallelism": True, "comm_overlap_config": CommOverlapConfig(tp_comm_overlap=True)}
    return recommended
""").body[0]
    got = {"25.09": {
        "commit": "c0ffee",
        "matrices": {"llama3_70b": {"h100": {"num_gpus_64": {
            "common": {"tp": 4, "mbs": 1, "gbs": 128, "vp": 5}, "fp8_ds": {"pp": 8, "cp": 1}, "bf16": {"pp": 4, "cp": 2},
        }}}},
        "map": {"llama3_70b": {"h100": {"fp8": "ub_fp8_a"}}},
        "calls": {"llama3_70b_pretrain_config": ast.parse("llama3_70b_pretrain_config(mock=True)").body[0].value},
        "library": {"llama3_70b_pretrain_config": lib},
    }}  # fmt: skip
    row = {"num_gpus": 64, "tp": 4, "pp": 8, "cp": 1, "vp": 5, "ep": None, "mbs": 1, "gbs": 128, "fsdp": None,
           "precision": "fp8"}  # fmt: skip
    settings, note = m.yaml_settings({"_yaml": got}, "25.09", "LLAMA3_70B", "DGX-H100", row)
    assert settings == {"tp_comm_overlap": True, "tp_overlap": "ub_fp8_a"} and "fp8_ds" in note
    # the bf16 entry has another layout: no recipe of this precision matches a bf16 row with PP 8
    settings, note = m.yaml_settings({"_yaml": got}, "25.09", "LLAMA3_70B", "DGX-H100", {**row, "precision": "bf16"})
    assert settings == {} and "has this row's layout" in note
    # perf-matrix fields: taken where every matching entry agrees
    assert m._yaml_fields([{"cuda_graphs": True}, {"cuda_graphs": True, "cpu_offloading_num_layers": 0}]) == (
        {"cuda_graphs": True}, ": cuda_graphs=True")
    fields, note = m._yaml_fields([{"cpu_offloading_num_layers": 20}, {"cpu_offloading_num_layers": 40}])
    assert fields == {} and "differs" in note


def test_token_drop_rows_carry_the_capacity_settings(records: list[dict]) -> None:
    """The 25.09 '-tokendrop' rows run Megatron-Bridge's apply_moe_token_drop defaults (capacity
    factor 1.0, padded to capacity); the record reader hands them to the Workload, and no other
    row states a capacity."""
    drop = [r for r in records if r["id"].endswith("-tokendrop")]
    assert len(drop) == 13
    for r in drop:
        assert r["settings"]["moe_capacity_factor"] == 1.0, r["id"]
        assert r["settings"]["moe_pad_to_capacity"] is True, r["id"]
        assert "apply_moe_token_drop" in r["notes"], r["id"]
        checked = RunRecord.model_validate(r).model_dump()
        _model, _cluster, work, _layout = record_inputs(checked)
        assert (work.moe_capacity_factor, work.moe_pad_to_capacity) == (1.0, True)
    others = [r for r in records if not r["id"].endswith("-tokendrop")]
    assert not any("moe_capacity_factor" in (r.get("settings") or {}) for r in others)


def test_dispatcher_type_read_from_recipe_functions_in_order() -> None:
    """Megatron-Core runs the flex back-end only under moe_token_dispatcher_type "flex": the reader
    takes the type a recipe function sets last; apply_flex_dispatcher_backend, or
    set_workload_base_configs where it applies the back-end (Megatron-Bridge from 26.04), hands the
    last word back to the back-end (None); an `if` touching the type leaves it unread."""
    import ast

    m = _recipes_module()
    src = '''
def qwen3_235b_a22b_pretrain_config_h100(precision="bf16"):
    cfg = qwen3_235b_a22b_pretrain_config()
    cfg.model.moe_flex_dispatcher_backend = base_cfg.moe_flex_dispatcher_backend
    cfg.model.moe_token_dispatcher_type = "alltoall"
    set_qwen3_common_configs(cfg)
    set_workload_base_configs(cfg, base_cfg)
    return cfg
def qwen3_30b_a3b_pretrain_config_h100(precision="bf16"):
    cfg = qwen3_30b_a3b_pretrain_config()
    cfg.model.moe_token_dispatcher_type = "flex"
    return cfg
def kimi_k2_pretrain_config_gb300(precision="bf16"):
    cfg = kimi_k2_pretrain_config()
    cfg.model.moe_token_dispatcher_type = "alltoall"
    apply_flex_dispatcher_backend(cfg.model, cfg.model.moe_flex_dispatcher_backend)
    return cfg
def deepseek_v3_pretrain_config_gb200(precision="bf16"):
    cfg = deepseek_v3_pretrain_config()
    if precision == "bf16":
        cfg.model.moe_token_dispatcher_type = "alltoall"
    return cfg
'''
    fns = {n.name: n for n in ast.parse(src).body}
    assert m._dispatcher_type_of(fns["qwen3_235b_a22b_pretrain_config_h100"], False) == "alltoall"
    assert m._dispatcher_type_of(fns["qwen3_235b_a22b_pretrain_config_h100"], True) is None
    assert m._dispatcher_type_of(fns["qwen3_30b_a3b_pretrain_config_h100"], False) == "flex"
    assert m._dispatcher_type_of(fns["kimi_k2_pretrain_config_gb300"], False) is None
    with pytest.raises(m.Unread):
        m._dispatcher_type_of(fns["deepseek_v3_pretrain_config_gb200"], False)


def test_rows_whose_recipe_sets_alltoall_run_the_alltoall_dispatcher(records: list[dict]) -> None:
    """26.02 / 26.02.01: the Qwen3 base configs name DeepEP, but the H100 / B200 / B300 235B recipe
    functions (and 26.02's 30B B200 one) set moe_token_dispatcher_type = "alltoall" after it
    (Megatron-Bridge d28afef38): those rows carry no flex dispatcher; later containers' HybridEP
    rows, applied by set_workload_base_configs, keep it."""
    by_id = {r["id"]: r for r in records}
    alltoall = (
        "mbridge-26.02-h100-qwen3-235b-a22b-fp8", "mbridge-26.02.01-h100-qwen3-235b-a22b-fp8",
        "mbridge-26.02-b200-qwen3-235b-a22b-mxfp8", "mbridge-26.02-b300-qwen3-235b-a22b-mxfp8",
        "mbridge-26.02-b200-qwen3-30b-a3b-mxfp8",
    )  # fmt: skip
    for rid in alltoall:
        r = by_id[rid]
        assert "moe_dispatcher" not in r["settings"], rid
        assert "sets moe_token_dispatcher_type = 'alltoall' after the back-end" in r["notes"], rid
    for rid in ("mbridge-26.04-h100-qwen3-30b-a3b-fp8", "mbridge-26.02-gb200-qwen3-235b-a22b-mxfp8"):
        assert by_id[rid]["settings"]["moe_dispatcher"] == "deepep", rid
        assert by_id[rid]["settings"]["moe_flex_backend"] == "hybridep", rid  # HybridEP's kernels
    assert "moe_flex_backend" not in by_id["mbridge-26.04.01-b200-deepseekv3-mxfp8"]["settings"]  # DeepEP
    for r in records:
        s = r.get("settings") or {}
        assert ("moe_flex_backend" in s) == ("flex dispatcher hybridep" in r["notes"] and "moe_dispatcher" in s), r["id"]
    said = [r["id"] for r in records if "'alltoall' after the back-end" in r["notes"]]
    assert sorted(said) == sorted(alltoall)


def test_gradient_dtype_read_from_the_recipe_functions_in_order() -> None:
    """Megatron-Bridge's MixedPrecisionConfig.grad_reduce_in_fp32 is what runs (setup() copies it onto
    the DDP config): the reader follows a recipe function and the helpers it calls, a later
    `cfg.mixed_precision = ...` resets what it knew, `_perf_precision` carries its own constant, and an
    `if` that would change a known value leaves it unread."""
    import ast

    m = _recipes_module()
    src = '''
def set_llama3_common_configs(cfg):
    cfg.mixed_precision.grad_reduce_in_fp32 = False
    cfg.ddp.grad_reduce_in_fp32 = False
def llama3_70b_pretrain_config_gb200(precision="bf16"):
    cfg = llama3_70b_pretrain_config()
    cfg.mixed_precision = precision_config
    set_llama3_common_configs(cfg)
    return cfg
def llama3_70b_pretrain_config_h100(precision="bf16"):
    cfg = llama3_70b_pretrain_config()
    set_llama3_common_configs(cfg)
    cfg.mixed_precision = get_precision_config(precision)
    return cfg
def llama3_70b_pretrain_config_b200(precision="bf16"):
    cfg = llama3_70b_pretrain_config()
    cfg.mixed_precision = get_precision_config(precision)
    cfg.mixed_precision.grad_reduce_in_fp32 = True
    return cfg
def _perf_precision(compute_dtype):
    cfg = bf16_mixed()
    cfg.grad_reduce_in_fp32 = False
    return cfg
def _benchmark_common(cfg):
    if not isinstance(cfg.mixed_precision, str):
        cfg.mixed_precision.grad_reduce_in_fp32 = False
    cfg.ddp.grad_reduce_in_fp32 = False
def llama3_8b_pretrain_8gpu_gb200_bf16_config():
    cfg = llama3_8b_pretrain_config()
    cfg.mixed_precision = _perf_precision("bf16")
    _benchmark_common(cfg)
    return cfg
def llama3_8b_pretrain_32gpu_gb200_bf16_config():
    cfg = _with_global_batch_size(llama3_8b_pretrain_8gpu_gb200_bf16_config(), 512)
    return cfg
def llama3_8b_pretrain_8gpu_gb300_bf16_config():
    cfg = llama3_8b_pretrain_config()
    _benchmark_common(cfg)
    return cfg
'''
    funcs = {n.name: n for n in ast.parse(src).body}

    def grad(name: str):
        state, said = m.mixed_precision_of(funcs[name], funcs)
        return state.get("grad_reduce_in_fp32", "unset"), said["grad_reduce_in_fp32"]

    assert grad("llama3_70b_pretrain_config_gb200") == (False, ["set_llama3_common_configs"])
    assert grad("llama3_70b_pretrain_config_h100")[0] == "unset"  # a new config after the helper
    assert grad("llama3_70b_pretrain_config_b200")[0] is True
    assert grad("llama3_8b_pretrain_8gpu_gb200_bf16_config") == (False, ["_perf_precision"])
    assert grad("llama3_8b_pretrain_32gpu_gb200_bf16_config")[0] is False
    # the guarded assignment would set a value not known before it: unknown, so not transcribed
    assert grad("llama3_8b_pretrain_8gpu_gb300_bf16_config")[0] is None


def test_megatron_bridge_rows_carry_the_recipes_gradient_dtype(records: list[dict]) -> None:
    """Every Megatron-Bridge performance recipe of 25.09 .. 26.08 reduces gradients in bf16
    (set_<family>_common_configs / the YAML's ConfigContainer / _perf_precision): each row states
    `main_grads: bf16` and names where it was read."""
    for r in records:
        assert (r.get("settings") or {}).get("main_grads") == "bf16", r["id"]
        assert "grad_reduce_in_fp32=False (" in r["notes"] or "perf recipes of the model" in r["notes"], r["id"]
        assert "main_grads bf16" in r["notes"], r["id"]


def test_fp8_parameter_gathers_read_from_the_precision_factories() -> None:
    """fp8_param_gather / fp4_param_gather come from the library's MixedPrecisionConfig factory the
    precision helper picks for the row's compute dtype (get_precision_config(precision) in an
    `if precision == ...` branch, passed to the library recipe as precision_config=), then any plain
    change; a conditional change leaves the field unknown."""
    import ast

    m = _recipes_module()
    factories = m.precision_factories('''
class MixedPrecisionConfig:
    grad_reduce_in_fp32: bool = True
    fp8_param_gather: bool = False
def bf16_mixed():
    return MixedPrecisionConfig(bf16=True, grad_reduce_in_fp32=True)
def bf16_with_fp8_current_scaling_mixed():
    cfg = bf16_mixed()
    cfg.fp8_param_gather = True
    return cfg
def bf16_with_nvfp4_mixed():
    cfg = bf16_mixed()
    cfg.fp8_param_gather = False
    cfg.fp4_param_gather = True
    return cfg
''')
    assert factories["bf16_mixed"] == {"grad_reduce_in_fp32": True, "fp8_param_gather": False}
    assert factories["bf16_with_fp8_current_scaling_mixed"]["fp8_param_gather"] is True
    assert factories["bf16_with_nvfp4_mixed"]["fp4_param_gather"] is True
    src = '''
def get_precision_config(compute_dtype):
    if compute_dtype == "fp8_cs":
        c = bf16_with_fp8_current_scaling_mixed()
        return c
    elif compute_dtype == "nvfp4":
        return bf16_with_nvfp4_mixed()
    else:
        return bf16_mixed()
def set_common(cfg):
    cfg.mixed_precision.grad_reduce_in_fp32 = False
def llama3_70b_pretrain_config_gb200(precision="bf16"):
    if precision == "bf16":
        precision_config = get_precision_config(precision)
    else:
        precision_config = get_precision_config(precision)
    cfg = llama3_70b_pretrain_config(mock=True, precision_config=precision_config)
    set_common(cfg)
    return cfg
def llama3_70b_pretrain_config_b200(precision="bf16"):
    cfg = llama3_70b_pretrain_config()
    cfg.mixed_precision = get_precision_config(precision)
    if precision == "nvfp4":
        cfg.mixed_precision.fp4_param = False
    if use_fsdp:
        cfg.mixed_precision.fp8_param_gather = False
    return cfg
'''
    funcs = {n.name: n for n in ast.parse(src).body}
    gb200 = funcs["llama3_70b_pretrain_config_gb200"]
    state, said = m.mixed_precision_of(gb200, funcs, "fp8_cs", factories)
    assert state == {"grad_reduce_in_fp32": False, "fp8_param_gather": True}
    assert said["fp8_param_gather"] == ["get_precision_config"] and said["grad_reduce_in_fp32"] == ["set_common"]
    assert m.mixed_precision_of(gb200, funcs, "bf16", factories)[0]["fp8_param_gather"] is False
    assert m.mixed_precision_of(gb200, funcs, "nvfp4", factories)[0]["fp4_param_gather"] is True
    b200 = funcs["llama3_70b_pretrain_config_b200"]
    state, _ = m.mixed_precision_of(b200, funcs, "nvfp4", factories)
    assert state["fp4_param_gather"] is False  # the `precision == "nvfp4"` branch runs (fp4_param is its alias)
    state, _ = m.mixed_precision_of(b200, funcs, "fp8_cs", factories)
    assert state["fp8_param_gather"] is None  # changed under `if use_fsdp`: unknown
    settings, notes = m._settings_of(state, {f: [] for f in m.MP_FIELDS}, "FP8-CS", "here")
    assert "fp8_params" not in settings and any("fp8_param_gather not read" in n for n in notes)


def test_megatron_bridge_rows_carry_the_recipes_parameter_gathers(records: list[dict]) -> None:
    """fp8 / MXFP8 rows whose recipe keeps fp8 primary weights state `fp8_params` (the factories
    get_precision_config / _perf_precision pick set fp8_param_gather; 25.09: run_script.py's
    get_precision_config(compute_dtype, fp8_recipe), every fp8 recipe the row may have run alike);
    BF16 rows never do."""
    by_id = {r["id"]: r for r in records}
    assert by_id["mbridge-25.11-gb200-llama3.1-405b-fp8-tensorwise"]["settings"]["fp8_params"] is True
    assert by_id["mbridge-26.08-gb300-deepseekv3-mxfp8"]["settings"]["fp8_params"] is True
    assert "recipes fp8_ds / fp8_cs alike" in by_id["mbridge-25.09-h100-llama3-70b-fp8"]["notes"]
    for r in records:
        s = r.get("settings") or {}
        if r["layout"]["precision"] == "bf16":
            assert "fp8_params" not in s, r["id"]
        elif "-25.09-" in r["id"]:
            assert s["fp8_params"] is True, r["id"]


def test_what_if_prices_on_a_copy_of_the_constants() -> None:
    """bench/heldout_accuracy.py --what-if GEN.FIELD=VALUE: the field is replaced for the run and
    restored after it; anything else is one line naming the flag."""
    from cost_models import calibration

    script = _script()
    before = calibration.CALIBRATION["ampere"]
    with script.what_if(["ampere.gemm_efficiency_bf16=0.775"]):
        assert calibration.CALIBRATION["ampere"].gemm_efficiency_bf16 == 0.775
        assert calibration.CALIBRATION["ampere"].gemm_half_dim == before.gemm_half_dim
    assert calibration.CALIBRATION["ampere"] is before
    for bad in ("ampere.nope=1", "volta.gemm_efficiency_bf16=0.7", "ampere.gemm_efficiency_bf16="):
        with pytest.raises(SystemExit, match="--what-if"), script.what_if([bad]):
            pass


def test_precision_helper_with_two_arguments() -> None:
    """25.09's get_precision_config(compute_dtype, fp8_recipe): the branch of each argument."""
    import ast

    m = _recipes_module()
    fn = ast.parse('''
def get_precision_config(compute_dtype, fp8_recipe):
    if compute_dtype == "fp8":
        if fp8_recipe == "ds":
            return bf16_with_fp8_delayed_scaling_mixed()
        elif fp8_recipe == "ss":
            return bf16_with_fp8_subchannel_scaling_mixed()
        else:
            raise ValueError(fp8_recipe)
    elif compute_dtype == "bf16":
        return bf16_mixed()
''').body[0]
    factories = {"bf16_with_fp8_delayed_scaling_mixed": {"fp8_param_gather": True},
                 "bf16_with_fp8_subchannel_scaling_mixed": {"fp8_param_gather": False},
                 "bf16_mixed": {"fp8_param_gather": False}}  # fmt: skip
    assert m.helper_precision(fn, {"compute_dtype": "fp8", "fp8_recipe": "ds"}, factories) == {"fp8_param_gather": True}
    assert m.helper_precision(fn, {"compute_dtype": "fp8", "fp8_recipe": "ss"}, factories) == {"fp8_param_gather": False}
    assert m.helper_precision(fn, {"compute_dtype": "fp8", "fp8_recipe": "mx"}, factories) == {}  # raises there
    assert m.helper_precision(fn, {"compute_dtype": "bf16"}, factories) == {"fp8_param_gather": False}


def test_identical_inputs_floor_by_hand(capsys) -> None:
    """bench/heldout_accuracy.py's identical-inputs floor: rows whose inputs the cost model reads
    are the same (the name and the source aside) form a group; the best one prediction is the
    geometric median of the measured figures. Two rows at 1,000 and 1,210 tokens/s: the best is
    1,100, +10.0 % and -9.1 % from them (median 9.5 %); the model's |error| is the rows' own; a
    lone row is no group."""
    from types import SimpleNamespace

    script = _script()
    runs = {r["id"]: r for r in (
        _run("a", "b200", 1000.0), _run("b", "b200", 1210.0, container="26.06"),
        _run("c", "b200", 900.0, tp=2),  # another layout: alone
    )}  # fmt: skip
    assert script.inputs_key(runs["a"]) == script.inputs_key(runs["b"])
    assert script.inputs_key(runs["a"]) != script.inputs_key(runs["c"])
    rows = {"a": SimpleNamespace(tokens_error_pct=+5.0), "b": SimpleNamespace(tokens_error_pct=-15.0),
            "c": SimpleNamespace(tokens_error_pct=1.0)}  # fmt: skip
    script.floor_section(runs, rows)
    out = capsys.readouterr().out
    assert "2 rows in 1 groups" in out and "spread (max / min - 1) 21.0 % at the median" in out
    assert "the best one prediction per group 9.5 / - %" in out  # no P90 under 10 rows
    assert "the model 10.0 / - %" in out and "over 20 %: a / b (21 %)" in out


def test_deepseek_rows_state_the_recipes_mtp_and_layout(records: list[dict]) -> None:
    """The DeepSeek-V3 recipes train one MTP layer placed by their pipeline layout (their own
    pp_layout, else the library's default map for PP x VP): a row whose recipe matched states
    both (mtp_num_layers 1, layers_per_stage with 61 decoder layers, the last stage's fewest);
    every other row states neither and says why; the w/o-MTP rows say they ran none."""
    dsv3 = [r for r in records if r["model"]["name"].startswith("DeepSeek-V3")]
    stated = [r for r in dsv3 if "layers_per_stage" in r["layout"]]
    assert len(stated) >= 20
    for r in dsv3:
        split = r["layout"].get("layers_per_stage")
        if split is not None:
            lo = r["layout"]
            assert r["model"]["mtp_num_layers"] == 1 and "pipeline layout" in r["notes"]
            assert len(split) == lo["pp"] * (lo["vp"] or 1) and sum(split) == 61
            assert split[-1] == min(split)  # the MTP layer and the loss share the last stage
        else:
            assert "mtp_num_layers" not in r["model"]
            if r["id"].endswith("-woMTP"):
                assert "no multi-token prediction layer" in r["notes"]
            else:
                assert "(deepseek_v3 recipes: mtp_num_layers 1) is not stated" in r["notes"]


def test_pipeline_layouts_read_as_megatron_reads_them() -> None:
    """mbridge_recipes.layout_chunks follows megatron-core 0.19 parse_str_to_list (`(..)*n`, then
    `x*n`, commas cosmetic); pipeline_split checks what a record can state; the DeepSeek-V3
    library map is evaluated from its AST (lists, + and *, `last_layer`)."""
    import ast

    m = _recipes_module()
    assert m.layout_chunks("Et*2|(tt|)*2,mL") == [
        ["embedding", "decoder", "decoder"], ["decoder", "decoder"], ["decoder", "decoder"],
        ["mtp", "loss"],
    ]  # fmt: skip
    assert m.pipeline_split("Et*2|(tt|)*2mL", 2, 2, 6) == ((2, 2, 2, 0), 1)
    assert m.pipeline_split("Ett|ttmL", 2, 1, 4) == ((2, 2), 1)
    assert "has 2 stages, pp x vp is 4" in m.pipeline_split("Ett|ttL", 2, 2, 4)
    assert "holds 4 decoder layers, the model 5" in m.pipeline_split("Ett|ttL", 2, 1, 5)
    assert "outside the last stage" in m.pipeline_split("Ettm|ttL", 2, 1, 4)
    assert "start with the embedding" in m.pipeline_split("tt|EttL", 2, 1, 4)
    with pytest.raises(ValueError, match="unknown layer letter"):
        m.layout_chunks("Etx|L")
    source = """
def set_layout(model_cfg):
    last_layer = ["mtp"] * mtp_layers + ["loss"]
    layout_map = {
        (1, 1): None,
        (2, 1): [["embedding"] + ["decoder"] * 3, ["decoder"] * 2 + last_layer],
        (2, 2): [["embedding"] + ["decoder"]] + [["decoder"] * 2] * 2 + [["decoder"] + last_layer],
    }
"""
    node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Dict))
    env = {"last_layer": ["mtp", "loss"]}
    table = {ast.literal_eval(k): m.expr_value(v, env) for k, v in zip(node.keys, node.values)}
    assert table[(1, 1)] is None
    assert m.pipeline_split(table[(2, 1)], 2, 1, 5) == ((3, 2), 1)
    assert m.pipeline_split(table[(2, 2)], 2, 2, 6) == ((1, 2, 2, 1), 1)
