"""bench/heldout/foundry_performance_summary.yaml (llm-foundry's MPT benchmark tables, held-out
evaluation data, never fitted): every row reproduces its own published MFU, the records score,
and the converter's rules hold on a hand-made table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from factories import load_script

from planner.validate import RunRecord, validate_file

HELDOUT = Path(__file__).resolve().parents[3] / "bench" / "heldout"
SUMMARY = HELDOUT / "foundry_performance_summary.yaml"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return yaml.safe_load(SUMMARY.read_text())


@pytest.fixture(scope="module")
def conv():
    return load_script(HELDOUT / "make_foundry_summary.py")


def test_every_record_passes_the_schema_and_scores(records: list[dict]) -> None:
    assert len(records) == 216
    for r in records:
        RunRecord.model_validate(r)
    rows = validate_file(SUMMARY)
    assert all(row.error is None for row in rows), [
        (row.id, row.error) for row in rows if row.error
    ]


def test_each_row_reproduces_its_published_mfu(records: list[dict]) -> None:
    """The README's MFU formula (its "MFU" section: (3 x 2N x seq + 3 x 4 n_layers d_model seq^2)
    per sequence, over the GPUs' peak) on the record's model, GPU and tokens/s gives the table's
    MFU column, kept in the notes: model, GPU, precision and throughput were read together. N is
    12 L d^2 + V d + seq d (learned positions); norms and biases are left out, as the README says."""
    peak = {"h100-sxm-80gb": {"bf16": 989e12, "fp8": 1979e12}, "a100-sxm-80gb": {"bf16": 312e12},
            "a100-sxm-40gb": {"bf16": 312e12}}  # fmt: skip
    for r in records:
        m = r["model"]
        layers, d, vocab, seq = m["num_layers"], m["hidden_size"], m["vocab_size"], m["seq_len"]
        params = 12 * layers * d * d + vocab * d + seq * d
        flops_per_token = 6 * params + 3 * layers * 2 * 2 * d * seq
        tflops = flops_per_token * r["measured_tokens_per_s_per_gpu"]
        mfu_pct = 100 * tflops / peak[r["gpu"]][r["layout"]["precision"]]
        published = float(re.search(r"published MFU ([\d.]+) %", r["notes"]).group(1))
        assert mfu_pct == pytest.approx(published, rel=0.005), r["id"]


def test_layouts_are_whole_batches(records: list[dict]) -> None:
    for r in records:
        lay = r["layout"]
        assert (lay["tp"], lay["pp"], lay["dp"]) == (1, 1, r["num_gpus"])
        assert lay["global_batch_seqs"] % (lay["micro_batch"] * r["num_gpus"]) == 0
        assert lay["zero_stage"] in (2, 3) and lay["recompute"] in ("full", "none")


def test_rows_of_the_shared_file_are_found_as_twins(records: list[dict]) -> None:
    module = load_script(HELDOUT.parent / "heldout_accuracy.py")
    shared = HELDOUT.parents[1].parent / "shared" / "data" / "published_runs.yaml"
    if not shared.exists():
        pytest.skip("../shared not beside the repository")
    twins = module.shared_twins(records, shared)
    assert len(twins) == 10 and all(v.startswith("mosaic-mpt-") for v in twins.values())
    assert {module.container_of(r) for r in records} == {"b2a43a147", "5e85bd62d"}


def test_converter_rules_by_hand(conv) -> None:
    text = (
        "## H100 80GB BF16\n"
        "|  Model | SeqLen (T) | # GPUs | GPU | MFU | MicroBatchSize | GradAccum | GlobalBatchSize "
        "| Throughput (T/s/GPU) | Precision | MP Mode | Sharding Strategy | Activation Checkpointing "
        "| Activation CPUOffload |\n"
        "|  --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
        "|  7b | 4096 | 8 | h100_80gb | 40.42 | 16 | 2 | 256 | 8611 | amp_bf16 | DEFAULT | FULL_SHARD "
        "| True | False |\n"
        "|  1b | 2048 | 8 | a100_40gb | 40.0 | 14 | 4 | 440 | 1 | amp_fp8 | DEFAULT | SHARD_GRAD_OP "
        "| False | False |\n"
    )
    got = list(conv.rows(text))
    assert [g[0] for g in got] == [4, 5] and got[0][1] == "H100 80GB BF16"
    cells = dict(zip(got[0][2], got[0][3]))
    model = {"name": "MPT-7B", "num_layers": 32, "hidden_size": 4096}
    rec = conv.record(
        cells, got[0][1], ("b2a43a147", "Update"), dict(model), "8c8dd48f7", "triton", False
    )
    assert rec["settings"] == {"attention_kernel": "flash1", "attention_unpad": False}
    assert "attn_impl 'triton'" in rec["notes"] and "no unpad" in rec["notes"]
    unpadded = conv.record(
        cells, got[0][1], ("b2a43a147", "Update"), dict(model), "8c8dd48f7", "triton", True
    )
    assert unpadded["settings"] == {"attention_kernel": "flash1"}  # the profile's unpad stands
    assert rec["layout"]["zero_stage"] == 3 and rec["layout"]["recompute"] == "full"
    assert rec["layout"]["micro_batch"] == 16 and rec["layout"]["dp"] == 8
    assert rec["model"]["seq_len"] == 4096 and rec["measured_tokens_per_s_per_gpu"] == 8611.0
    assert "rows of commit b2a43a147" in rec["source"] and "published MFU 40.42 %" in rec["notes"]
    bad = dict(zip(got[1][2], got[1][3]))
    with pytest.raises(ValueError, match="uneven micro-batches"):
        conv.record(bad, got[1][1], ("b2a43a147", "x"), dict(model), "8c8dd48f7", "triton", False)


def test_attention_kernel_is_read_from_the_rows_commit(conv, monkeypatch) -> None:
    """attn_impl_of: submit_benchmarks.py's --attn_impl default at the row's commit, refused
    where that commit's sweep.sh passes the flag or the default names a kernel not read."""
    files = {
        "aaa": ("parser.add_argument('--attn_impl', type=str, default='triton')", "python x.py"),
        "bbb": ("parser.add_argument('--attn_impl', type=str, default='triton')",
                "python x.py --attn_impl flash"),
        "ccc": ("parser.add_argument('--attn_impl', type=str, default='flash')", ""),
        "ddd": ("parser.add_argument('--seq_len')", ""),
    }  # fmt: skip

    def fake_git(git_dir: str, *args: str) -> str:
        sha, path = args[1].split(":", 1)
        return files[sha][0 if path.endswith("submit_benchmarks.py") else 1]

    monkeypatch.setattr(conv, "git", fake_git)
    cache: dict = {}
    assert conv.attn_impl_of("g", "aaa", cache) == "triton" and cache == {"aaa": "triton"}
    for sha, why in (("bbb", "sets --attn_impl"), ("ccc", "kernel not read"),
                     ("ddd", "no --attn_impl default")):  # fmt: skip
        with pytest.raises(ValueError, match=why):
            conv.attn_impl_of("g", sha, cache)


ATTENTION = """
def flash_attn_fn(query, key, value, key_padding_mask=None):
    query_unpad, indices_q, cu_seqlens_q, max_seqlen_q = bert_padding.unpad_input(query, key_padding_mask)
    return flash_attn_interface.flash_attn_varlen_func(query_unpad, key, value)

def triton_flash_attn_fn(query, key, value, attn_bias=None, key_padding_mask=None):
    if key_padding_mask is not None:
        attn_bias = attn_bias.masked_fill(~key_padding_mask, -1e4)
    return flash_attn_func(query, key, value, attn_bias, True, None)
"""


def test_unpad_is_read_from_the_attention_function_of_the_row(conv, monkeypatch) -> None:
    """unpads_of: whether the attn_impl's function at the row's commit calls unpad_input (the
    varlen 'flash' path does; the Triton one passes padded tensors); a commit without the
    function is refused."""
    monkeypatch.setattr(conv, "git", lambda git_dir, *args: ATTENTION)
    cache: dict = {}
    assert conv.unpads_of("g", "aaa", "triton", cache) is False
    assert conv.unpads_of("g", "aaa", "flash", cache) is True
    with pytest.raises(ValueError, match="no torch_attn_fn"):
        conv.unpads_of("g", "aaa", "torch", cache)


def test_every_row_states_the_triton_kernel(records: list[dict]) -> None:
    want = {"attention_kernel": "flash1", "attention_unpad": False}
    assert all(r["settings"] == want for r in records)


def test_groups_sort_nemo_versions_and_commits_together(records: list[dict]) -> None:
    """Several held-out files score as one set (heldout_accuracy.py FILE FILE ...): the container
    groups order NeMo versions by number, then the commits of the repository tables."""
    module = load_script(HELDOUT.parent / "heldout_accuracy.py")
    nemo = yaml.safe_load((HELDOUT / "nemo_performance_summary.yaml").read_text())
    runs = {r["id"]: r for r in records[:3] + nemo}
    labels = [label for label, _ in module.groups(runs, {}) if label.startswith("  container")]
    assert labels == ["  container 25.02", "  container 25.04", "  container 25.07",
                      "  container 5e85bd62d"]  # fmt: skip
