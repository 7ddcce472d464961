"""aiconfigurator's measured context-attention tables checked against this project's measured
H100 / H200 tables (issue 32).

NVIDIA's aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships per-op latencies
its collectors measured on real GPUs under
`aic-core/src/aiconfigurator_core/systems/data/<system>/attention/<framework>/<version>/
context_attention_perf.parquet` (systems h100_sxm, h200_sxm, b200_sxm, b300_sxm, gb200, gb300,
...). A context-attention row is one inference prefill call of a serving framework's attention
layer (`collector/{trtllm,vllm,sglang}/collect_attn.py`): batch x isl new tokens, causal, bf16 or
fp8, written into a paged KV cache, CUDA-graph replays timed with CUDA events (mean of 6 after 10
warm-ups, `collector/helper.py benchmark_with_power`). No backward is measured.

Nothing of it is shipped or imported here (docs/calibration.md#aiconfigurators-attention-tables-
looked-at-not-imported). This script reads the user's own copy (pyarrow needed) and prints the
figures that decision rests on:

1. on the GPUs this project measured: each (framework, version, kernel) file's bf16 prefill
   latency over the cuDNN fused forward of `../shared/data/kernels/<gpu>/attention.csv` (the
   kernel Transformer Engine runs in training) at the same (batch, seq, heads, kv heads, head
   dim), and over FlashAttention-2's;
2. on Blackwell: the forward's fraction of the dense bf16 peak at the shared table's shapes, per
   sequence length, beside the preset curve's `attention_efficiency`;
3. forward speed between Blackwell parts (B300 / B200, GB300 / GB200, GB200 / B200, GB300 / B200:
   the model prices the peak ratio, 1.0 / 1.111 / 1.111 / 1.111) at the same shapes, framework,
   version and kernel;
4. Blackwell over Hopper: the fraction of the dense peak a Blackwell forward reaches over the
   H100's, same shapes, framework and version, per sequence length.
5. Blackwell training attention carried from the H100's measured table: at each shape of the
   shared H100 table's cuDNN fused rows that both aiconfigurator tables hold, the part's forward
   speed over the H100's (same framework, version, kernel) times the H100's measured forward +
   backward rate (its `time_ms`), as a fraction of the part's dense bf16 peak (fwd + bwd FLOPs:
   3.5 x forward, the priced `attention_efficiency`'s definition); median per sequence length
   and over all, beside the priced value (the forward and backward efficiencies the part is
   priced at, combined over those FLOPs: they differ where the part has a measured
   attention_speed_vs_flagship). It assumes the backward speeds up as the forward does.

Rows faster than the GPU's dense bf16 peak allows are counted (they are not one call's time).

Usage: python bench/aic_attention_check.py AIC_SYSTEMS_DATA_DIR [SHARED_KERNELS_DIR]
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

from aic_gemm_check import ratio_summary

import models_zoo
from cost_models.calibration import calibration_for_cluster
from cost_models.compute import BACKWARD_ATTENTION_FACTOR

TABLE = "context_attention_perf.parquet"
COLUMNS = ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "attn_dtype",
           "kv_cache_dtype", "latency")
BF16 = ("bfloat16", "bf16")
SYSTEMS = {  # aiconfigurator system -> (this project's GPU preset, shared kernel folder or None)
    "h100_sxm": ("h100-sxm-80gb", "h100-sxm-80gb"),
    "h200_sxm": ("h200-sxm-141gb", "h200-sxm-141gb"),
    "b200_sxm": ("b200", None),
    "gb200": ("gb200", None),
    "b300_sxm": ("b300", None),
    "gb300": ("gb300", None),
}
PRESET_CLUSTER = {"b200": "dgx-b200", "gb200": "gb200-nvl72", "b300": "dgx-b300",
                  "gb300": "gb300-nvl72"}
ULTRA_PAIRS = (("b300_sxm", "b200_sxm"), ("gb300", "gb200"), ("gb200", "b200_sxm"),
               ("gb300", "b200_sxm"))
HOPPER_PAIRS = (("b200_sxm", "h100_sxm"), ("gb200", "h100_sxm"))
CARRIED = ("b200_sxm", "gb200", "b300_sxm", "gb300")
FWD_BWD_FLOPS = 3.5
"""Forward + backward attention FLOPs over the forward's (the backward 2.5x the forward:
cost_models.compute.ATTENTION_BACKWARD)."""


class TableError(ValueError):
    """A malformed table: the message is one line naming the file and the field."""


def _read_parquet(path: Path) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TableError(f"{path}: reading aiconfigurator's parquet tables needs pyarrow "
                         "(pip install pyarrow)") from None
    try:
        return pq.read_table(path).to_pylist()
    except Exception as err:  # pyarrow raises several types for a bad file
        raise TableError(f"{path}: not a readable parquet table ({type(err).__name__})") from None


def prefill_rows(rows: list[dict], path: Path) -> list[dict]:
    """The bf16 (compute and KV cache), full-attention rows of one table, each checked:
    positive integer dims, heads a multiple of kv heads, latency > 0 (ms)."""
    if rows and (missing := [c for c in COLUMNS if c not in rows[0]]):
        raise TableError(f"{path}: no column {missing[0]} (a context_attention_perf table has "
                         f"{', '.join(COLUMNS)})")
    out = []
    for i, r in enumerate(rows):
        if r["attn_dtype"] not in BF16 or r["kv_cache_dtype"] not in BF16 or r.get("window_size"):
            continue
        for c in COLUMNS[:5]:
            if not isinstance(r[c], int) or r[c] <= 0:
                raise TableError(f"{path}: row {i}: {c} must be a positive integer")
        if r["num_heads"] % r["num_key_value_heads"]:
            raise TableError(f"{path}: row {i}: num_heads must be a multiple of "
                             "num_key_value_heads")
        lat = r["latency"]
        if not isinstance(lat, (int, float)) or not (math.isfinite(lat) and lat > 0):
            raise TableError(f"{path}: row {i}: latency must be > 0 (ms)")
        out.append(r)
    return out


def causal_fwd_flops(b: int, s: int, h: int, d: int) -> float:
    """Forward FLOPs of one causal call, as cost_models.kernels.attention_fwd_flops counts
    them (s / 2 keys per query; QK^T and PV, 2 d each)."""
    return 2.0 * b * s * (s / 2.0) * h * (d + d)


def _key(b, s, h, kv, d) -> tuple[int, int, int, int, int]:
    return (int(b), int(s), int(h), int(kv), int(d))


def find_tables(root: Path) -> list[tuple[str, str, str, Path]]:
    """(system, framework, version, path) of every context-attention table under root."""
    found = []
    for path in sorted(root.glob(f"*/attention/*/*/{TABLE}")):
        version = path.parent
        found.append((version.parents[2].name, version.parent.name, version.name, path))
    if not found:
        raise TableError(f"{root}: no */attention/*/*/{TABLE} (give aiconfigurator's "
                         "aic-core/src/aiconfigurator_core/systems/data folder)")
    return found


def by_kernel(rows: list[dict]) -> dict[str, dict[tuple, float]]:
    """kernel_source -> {(batch, seq, heads, kv heads, head dim): latency ms}."""
    out: dict[str, dict[tuple, float]] = {}
    for r in rows:
        key = _key(r["batch_size"], r["isl"], r["num_heads"], r["num_key_value_heads"],
                   r["head_dim"])
        out.setdefault(str(r.get("kernel_source") or "-"), {})[key] = float(r["latency"])
    return out


def shared_forward(shared: Path, gpu_dir: str) -> dict[str, dict[tuple, float]]:
    """kernel (fused, fa2) -> {shape: forward ms} of the measured bf16 causal rows."""
    out: dict[str, dict[tuple, float]] = {}
    with (shared / gpu_dir / "attention.csv").open() as f:
        for r in csv.DictReader(f):
            if r["causal"] == "true" and r["head_dim"] == r.get("v_head_dim", r["head_dim"]):
                key = _key(r["batch"], r["seq"], r["heads"], r["kv_heads"], r["head_dim"])
                out.setdefault(r["kernel"], {})[key] = float(r["forward_ms"])
    return out


def above_peak(table: dict[tuple, float], peak_tflops: float) -> int:
    return sum(causal_fwd_flops(b, s, h, d) / (ms * 1e9) > peak_tflops
               for (b, s, h, _kv, d), ms in table.items())


def check_measured(tables, shared: Path) -> None:
    print("1. prefill latency / measured forward at the same shape "
          "(cuDNN fused; FlashAttention-2 after |):")
    for system, fw, version, path in tables:
        gpu_id, gpu_dir = SYSTEMS.get(system, (None, None))
        if gpu_dir is None:
            continue
        ours, peak = shared_forward(shared, gpu_dir), models_zoo.load_gpu(gpu_id).peak_bf16_tflops
        for kern, table in sorted(by_kernel(prefill_rows(_read_parquet(path), path)).items()):
            cols = []
            for mine in ("fused", "fa2"):
                r = [table[k] / v for k, v in ours.get(mine, {}).items() if k in table]
                cols.append(ratio_summary(r) if r else "no common shape")
            print(f"  {system} {fw} {version} {kern}: {cols[0]} | {cols[1]}; "
                  f"{above_peak(table, peak)} of {len(table)} rows above the dense peak")


def _fractions(table: dict[tuple, float], shapes: list[tuple], peak: float) -> dict[int, float]:
    """seq -> median forward fraction of peak over the given shapes the table holds."""
    per: dict[int, list[float]] = {}
    for b, s, h, kv, d in shapes:
        if (ms := table.get((b, s, h, kv, d))) is not None:
            per.setdefault(s, []).append(causal_fwd_flops(b, s, h, d) / (ms * 1e9) / peak)
    return {s: statistics.median(v) for s, v in sorted(per.items())}


def check_blackwell(tables, shared: Path) -> None:
    shapes = sorted(shared_forward(shared, "h100-sxm-80gb").get("fused", {}))
    print("2. forward fraction of the dense bf16 peak at the shared table's shapes "
          "(median per sequence):")
    for gpu_id, cluster in PRESET_CLUSTER.items():
        cal = calibration_for_cluster(models_zoo.load_cluster(cluster))
        print(f"  {gpu_id} preset curve ({cluster}): attention_efficiency "
              f"{cal.attention_efficiency:g} (forward and forward + backward)")
    for system, fw, version, path in tables:
        gpu_id, gpu_dir = SYSTEMS.get(system, (None, "-"))
        if gpu_dir is not None:
            continue
        peak = models_zoo.load_gpu(gpu_id).peak_bf16_tflops
        for kern, table in sorted(by_kernel(prefill_rows(_read_parquet(path), path)).items()):
            fr = _fractions(table, shapes, peak)
            if fr:
                print(f"  {system} {fw} {version} {kern}: "
                      + ", ".join(f"{s}: {f:.3f}" for s, f in fr.items())
                      + f"; {above_peak(table, peak)} of {len(table)} rows above the peak")


def check_ultra(tables, shared: Path) -> None:
    shapes = set(shared_forward(shared, "h100-sxm-80gb").get("fused", {}))
    found = {(s, fw, v): p for s, fw, v, p in tables}
    print("3. forward speed between Blackwell parts at the shared table's shapes (same "
          "framework, version, kernel):")
    for ultra, base in ULTRA_PAIRS:
        for (system, fw, version), path in sorted(found.items()):
            if system != ultra or (base, fw, version) not in found:
                continue
            other = found[(base, fw, version)]
            a = by_kernel(prefill_rows(_read_parquet(path), path))
            b = by_kernel(prefill_rows(_read_parquet(other), other))
            for kern in sorted(set(a) & set(b)):
                r = [b[kern][k] / a[kern][k] for k in shapes if k in a[kern] and k in b[kern]]
                if r:
                    print(f"  {ultra} / {base} {fw} {version} {kern}: {ratio_summary(r)}")


def check_generations(tables, shared: Path) -> None:
    shapes = sorted(shared_forward(shared, "h100-sxm-80gb").get("fused", {}))
    found = {(s, fw, v): p for s, fw, v, p in tables}
    print("4. Blackwell / H100 fraction of the dense bf16 peak at the shared table's shapes "
          "(same framework and version; median per sequence):")
    for new, old in HOPPER_PAIRS:
        peaks = [models_zoo.load_gpu(SYSTEMS[s][0]).peak_bf16_tflops for s in (new, old)]
        for (system, fw, version), path in sorted(found.items()):
            if system != new or (old, fw, version) not in found:
                continue
            a = by_kernel(prefill_rows(_read_parquet(path), path))
            b = by_kernel(prefill_rows(_read_parquet(found[(old, fw, version)]),
                                       found[(old, fw, version)]))
            for ka in sorted(a):
                for kb in sorted(b):
                    fa = _fractions(a[ka], shapes, peaks[0])
                    fb = _fractions(b[kb], shapes, peaks[1])
                    common = [s for s in fa if s in fb]
                    if common:
                        print(f"  {new} {ka} / {old} {kb}, {fw} {version}: "
                              + ", ".join(f"{s}: {fa[s] / fb[s]:.2f}" for s in common))


def shared_total(shared: Path, gpu_dir: str) -> dict[tuple, float]:
    """{shape: forward + backward ms} of the measured bf16 causal cuDNN fused rows."""
    out: dict[tuple, float] = {}
    with (shared / gpu_dir / "attention.csv").open() as f:
        for r in csv.DictReader(f):
            if r["causal"] == "true" and r["kernel"] == "fused" and r["head_dim"] == r.get(
                "v_head_dim", r["head_dim"]
            ):
                out[_key(r["batch"], r["seq"], r["heads"], r["kv_heads"], r["head_dim"])] = float(
                    r["time_ms"]
                )
    return out


def carried_fractions(part: dict[tuple, float], h100: dict[tuple, float],
                      total_ms: dict[tuple, float], peak: float) -> dict[int, list[float]]:
    """seq -> the part's carried fwd + bwd fractions of `peak` (section 5) per shape."""
    per: dict[int, list[float]] = {}
    for key, ms in total_ms.items():
        if key in part and key in h100:
            b, s, h, _kv, d = key
            part_ms = ms * part[key] / h100[key]  # the H100's measured time / forward speed
            flops = FWD_BWD_FLOPS * causal_fwd_flops(b, s, h, d)
            per.setdefault(s, []).append(flops / (part_ms * 1e9) / peak)
    return per


def priced_fwd_bwd(cal) -> float:
    """The fraction of the bf16 peak the model prices one causal attention forward + backward at
    (fused kernel): forward FLOPs F at attention_efficiency, the backward's
    BACKWARD_ATTENTION_FACTOR x F at attention_backward_efficiency (the forward's where None),
    over their 3.5 F."""
    fwd = cal.attention_efficiency
    bwd = cal.attention_backward_efficiency or fwd
    return (1 + BACKWARD_ATTENTION_FACTOR) / (1 / fwd + BACKWARD_ATTENTION_FACTOR / bwd)


def check_carried(tables, shared: Path) -> None:
    total_ms = shared_total(shared, "h100-sxm-80gb")
    found = {(s, fw, v): p for s, fw, v, p in tables}
    print("5. Blackwell forward + backward attention carried from the measured H100 table "
          "(fraction of the part's dense bf16 peak; median per sequence, then over all shapes):")
    for (system, fw, version), path in sorted(found.items()):
        if system not in CARRIED or ("h100_sxm", fw, version) not in found:
            continue
        gpu_id = SYSTEMS[system][0]
        priced = calibration_for_cluster(models_zoo.load_cluster(PRESET_CLUSTER[gpu_id]))
        a = by_kernel(prefill_rows(_read_parquet(path), path))
        other = found[("h100_sxm", fw, version)]
        b = by_kernel(prefill_rows(_read_parquet(other), other))
        peak = models_zoo.load_gpu(gpu_id).peak_bf16_tflops
        for kern in sorted(set(a) & set(b)):
            per = carried_fractions(a[kern], b[kern], total_ms, peak)
            if per:
                every = [f for v in per.values() for f in v]
                print(f"  {system} {fw} {version} {kern}: "
                      + ", ".join(f"{s}: {statistics.median(v):.3f}" for s, v in sorted(per.items()))
                      + f"; all {statistics.median(every):.3f} (n {len(every)}); priced "
                      f"{priced_fwd_bwd(priced):.4g}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "kernels"
    shared = Path(argv[1]) if len(argv) > 1 else default
    try:
        tables = find_tables(Path(argv[0]))
        check_measured(tables, shared)
        check_blackwell(tables, shared)
        check_ultra(tables, shared)
        check_generations(tables, shared)
        check_carried(tables, shared)
    except TableError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
