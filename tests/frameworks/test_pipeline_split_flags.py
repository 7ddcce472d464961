"""Megatron's --account-for-embedding/loss-in-pipeline-split as the planner exports and prices them,
checked against the real megatron-core 0.19.2 (parse_args, validate_args, TransformerConfig and
transformer_block.get_num_layers_to_build) and torchtitan 0.3.0 (the split its
_generate_llm_fqn_per_model_part makes of the exported first / last-stage-less-layers).

Runs in the frameworks environment (tests/frameworks/requirements.txt); skipped elsewhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.core", reason="real frameworks not installed (.ci/run)")
pytest.importorskip("torchtitan", reason="real frameworks not installed (.ci/run)")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import factories as f
from test_real_frameworks import check_megatron, fake_world  # noqa: F401  (the fixture)

from cost_models.pipeline import layout_chunk_counts
from cost_models.specs import Layout
from planner.export import launch, plan_exports

# name -> (num_layers, (embedding, loss) counted, layout fields): the flags over an even split,
# chunks that hold only the embedding / the loss (Llama 3.1 405B's PP 16 x VP 8 over 126 layers,
# scaled down), the loss alone, the embedding alone (the first chunk short: the cost model's own
# split would shorten the last), and no interleaving.
CASES = {
    "both-vp2": (30, (True, True), {"tp": 2, "pp": 4, "dp": 4, "vp": 2}),
    "both-empty-end-chunks": (6, (True, True), {"tp": 2, "pp": 4, "dp": 4, "vp": 2}),
    "loss-only": (31, (False, True), {"tp": 2, "pp": 4, "dp": 4, "vp": 2}),
    "embedding-only": (31, (True, False), {"tp": 2, "pp": 4, "dp": 4, "vp": 2}),
    "both-no-vp": (14, (True, True), {"tp": 2, "pp": 4, "dp": 4}),
}


def _result(name: str):
    layers, (embedding, loss), fields = CASES[name]
    layout = Layout(
        **fields,
        account_for_embedding_in_pipeline_split=embedding,
        account_for_loss_in_pipeline_split=loss,
    )
    return f.result_for(f.dense_model(num_layers=layers), f.cluster(32), f.workload(global_batch=64), layout)


@pytest.mark.parametrize("name", CASES)
def test_megatron_builds_the_split_the_planner_prices(name, fake_world, monkeypatch):  # noqa: F811
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.training.argument_utils import core_transformer_config_from_args

    result = _result(name)
    lo, model = result.best.layout, result.model
    args = plan_exports.to_megatron_args(result)
    for part in ("embedding", "loss"):
        given = getattr(lo, f"account_for_{part}_in_pipeline_split")
        assert (f"--account-for-{part}-in-pipeline-split" in args) == given
    assert "--pipeline-model-parallel-layout" not in args
    ns = check_megatron(result, 0, fake_world, monkeypatch)
    ns.apply_rope_fusion = False  # stub: Transformer Engine is not installed here
    config = core_transformer_config_from_args(ns)  # TransformerConfig.__post_init__'s checks
    vp = ns.virtual_pipeline_model_parallel_size
    megatron = [
        get_num_layers_to_build(config, vp_stage=(v if vp else None), pp_rank=r)
        for v in range(lo.vp)
        for r in range(lo.pp)
    ]  # model order: chunk c is pipeline rank c % pp, virtual stage c // pp
    assert megatron == layout_chunk_counts(model, lo)
    assert launch.stage_layer_counts(model, result.best) == [
        sum(megatron[r::lo.pp]) for r in range(lo.pp)
    ]


@pytest.mark.parametrize("name", CASES)
def test_torchtitan_splits_the_export_as_priced(name):
    """torchtitan's first / last_stage_less_layers are the embedding and output weights of its
    split: the exported values give each stage the planner's layers (and a stage holding only the
    embedding or the output where the planner's chunk is empty)."""
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part

    result = _result(name)
    lo, model = result.best.layout, result.model
    par = launch.torchtitan_parallelism(model, result.workload, result.best)
    per, first, last = (
        par["pipeline_parallel_layers_per_stage"],
        par["pipeline_parallel_first_stage_less_layers"],
        par["pipeline_parallel_last_stage_less_layers"],
    )
    stages = (model.num_layers + first + last) // per
    assert stages == lo.pp * lo.vp
    parts = _generate_llm_fqn_per_model_part(stages, model.num_layers, first, last)
    titan = [sum(name.startswith("layers.") for name in part) for part in parts]
    assert titan == layout_chunk_counts(model, lo)


# Multi-token prediction: the even split counts the MTP layer as one of the last chunk's
# (cost_models.pipeline.even_chunk_counts); with interleaving the export writes the layout
# string with its `m`, without it the first / last flags (Megatron then puts the MTP layer on the
# last pipeline stage: multi_token_prediction.get_mtp_num_layers_to_build).
MTP_CASES = {
    "mtp-vp2": (31, {"tp": 2, "pp": 4, "dp": 4, "vp": 2}),
    "mtp-no-vp": (31, {"tp": 2, "pp": 4, "dp": 4}),
}


@pytest.mark.parametrize("name", MTP_CASES)
def test_megatron_builds_the_mtp_split_the_planner_prices(name, fake_world, monkeypatch):  # noqa: F811
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.training.argument_utils import core_transformer_config_from_args

    layers, fields = MTP_CASES[name]
    model = f.dense_model(num_layers=layers, mtp_num_layers=1)
    lo = Layout(**fields)
    result = f.result_for(model, f.cluster(32), f.workload(global_batch=64), lo)
    ns = check_megatron(result, 0, fake_world, monkeypatch)
    assert ns.mtp_num_layers == 1
    ns.apply_rope_fusion = False  # stub: Transformer Engine is not installed here
    config = core_transformer_config_from_args(ns)  # the layout's validate_layer_layout too
    vp = ns.virtual_pipeline_model_parallel_size
    if config.pipeline_model_parallel_layout is not None:
        # the layout's own grid, [pp rank][virtual stage] (get_num_layers_to_build reads it at
        # parallel_state's rank, not pp_rank)
        grid = config.pipeline_model_parallel_layout.layout
        megatron = [grid[r][v].count(LayerType.decoder) for v in range(lo.vp) for r in range(lo.pp)]
        mtp = [[stage.count(LayerType.mtp) for stage in rank] for rank in grid]
        assert mtp[-1][-1] == 1 and sum(map(sum, mtp)) == 1  # last rank, last chunk
    else:
        assert vp is None and ns.decoder_last_pipeline_num_layers is not None
        megatron = [get_num_layers_to_build(config, pp_rank=r) for r in range(lo.pp)]
    assert megatron == layout_chunk_counts(model, lo)
    assert megatron[-1] == megatron[0] - 1  # the last chunk gives its MTP layer's slot


@pytest.mark.parametrize(
    "layout",
    [
        "Et*4|(t*4|)*14tmL",
        "Et|(tt|)*30mL",
        "Et|(tt|)*30L",
        "Et*4|(t*7|)*5t*8|tmL",
        "Ettt|(tt|)*29,m|L",
    ],
)
def test_the_heldout_layout_reader_reads_as_megatron(layout):
    """bench/heldout/mbridge_recipes.layout_chunks (the Megatron-Bridge recipes' pp_layout
    strings, held-out records' layers_per_stage) against megatron-core 0.19.2's own
    PipelineParallelLayerLayout.parse_str_to_list."""
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    recipes = f.load_script(ROOT / "bench" / "heldout" / "mbridge_recipes.py")
    theirs = [
        [t.name for t in stage] for stage in PipelineParallelLayerLayout.parse_str_to_list(layout)
    ]
    assert recipes.layout_chunks(layout) == theirs
