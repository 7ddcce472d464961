"""Relative forward-attention speeds between GPUs from aiconfigurator's measured tables (issue 32:
no GPU generation biased by more than 5 % at the median; GpuSpec.attention_speed_vs_flagship).

NVIDIA's aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) times one serving
framework's context (prefill) attention call per shape with the same collector on every system it
ships: causal, CUDA-graph replays timed by CUDA events (method: bench/aic_attention_check.py's
docstring). Its absolute level is not this project's training kernel (cuDNN fused attention under
Transformer Engine), so it is not imported (docs/calibration.md); but the time of one part over
another's at the same shape, same collector, same software version and kernel, cancels whatever
the collector does: it is the parts' relative attention-forward speed, the way
bench/aic_gpu_speeds.py measures their relative GEMM speed. Blackwell Ultra (B300, GB300) doubled
the SFU (exponential) throughput that a Blackwell attention forward is bound by (NVIDIA, "Inside
NVIDIA Blackwell Ultra", 2025; FlashAttention-4, arXiv 2603.05451), so its attention speed-up is
not its GEMM speed-up nor its datasheet peak ratio. This script prints:

1. every (backend, version) collection held for the systems, with their device strings; a system
   whose rows carry another device (sglang 0.5.14's b300_sxm rows say 'NVIDIA GB300') or run
   faster than its dense bf16 peak allows (sglang 0.5.10's b200_sxm) is left out of it;
2. per collection and pair of systems: the per-shape speed (reference time / part time) over the
   training shape set, median, P10, P90 and count: multi-head / GQA attention
   (attention/<backend>/<version>/context_attention_perf.parquet; bf16 compute and KV cache, no
   window, sequence >= 2,048, head dim 128, also 64 and 256) and MLA
   (mla/<backend>/<version>/context_mla_perf.parquet: DeepSeek-V3's q/k head dim 192, v 128,
   the same sequences); the same key on both sides (kernel, batch, sequence, heads, KV heads,
   head dim; MLA: batch, sequence, local heads, TP);
3. per part: the median speed vs the generation's flagship in every collection and its range;
   the control H200 / H100 (the same silicon) should be ~1.0;
4. for one collection (--reference): the median over shape subsets (sequence 2-4K / 8-16K,
   batch <= 4 / > 4);
5. the GPU presets: the shipped attention_speed_vs_flagship beside the reference collection's
   median, and the forward and backward speeds the model prices (cost_models.calibration).

Usage: python bench/aic_attention_speeds.py AIC_SYSTEMS_DATA [--reference trtllm/1.3.0rc20]
AIC_SYSTEMS_DATA: an aiconfigurator checkout's aic-core/src/aiconfigurator_core/systems/data
(only <system>/attention and <system>/mla are read). Needs pyarrow (pip install pyarrow).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aic_gemm_check import AicError, open_table, pyarrow_parquet
from aic_gpu_speeds import DEVICE_PREFIX, FLAGSHIP, SYSTEMS, quantiles

import models_zoo
from cost_models.calibration import attention_speeds

PAIRS = (
    ("b300_sxm", "b200_sxm"),
    ("gb200", "b200_sxm"),
    ("gb300", "b200_sxm"),
    ("gb300", "gb200"),
    ("h200_sxm", "h100_sxm"),  # control: the same silicon (H200 = H100 compute, more HBM)
)
MIN_SEQ = 2048
HEAD_DIMS = (128, 64, 256)
"""Multi-head / GQA head dims reported; 128 is the priced one (every preset model but gpt-oss)."""
MLA_DIMS = (192, 128)
"""q/k and v head dims of aiconfigurator's MLA context rows (DeepSeek-V3: nope 128 + rope 64)."""
MHA_COLUMNS = ("device", "kernel_source", "batch_size", "isl", "num_heads",
               "num_key_value_heads", "head_dim", "attn_dtype", "kv_cache_dtype", "latency")  # fmt: skip
MLA_COLUMNS = ("device", "kernel_source", "batch_size", "isl", "num_heads", "tp_size",
               "mla_dtype", "kv_cache_dtype", "latency")  # fmt: skip
SHAPE_SET = (
    f"causal prefill, bf16 compute and KV cache, no window, sequence >= {MIN_SEQ:,}; multi-head "
    f"/ GQA by head dim (128 priced), MLA q/k {MLA_DIMS[0]} v {MLA_DIMS[1]}"
)


def causal_fwd_flops(b: int, s: int, h: int, d_qk: int, d_v: int) -> float:
    """Forward FLOPs of one causal call (s / 2 keys per query; QK^T 2 d_qk, PV 2 d_v each), as
    cost_models.kernels counts them."""
    return 2.0 * b * s * (s / 2.0) * h * (d_qk + d_v)


def _valid(row: dict, ints: tuple[str, ...]) -> bool:
    if any(not isinstance(row[c], int) or row[c] <= 0 for c in ints):
        return False
    lat = row["latency"]
    return isinstance(lat, float | int) and math.isfinite(lat) and lat > 0


def _window(path: Path) -> list | None:
    """The window_size column where the table has one (older tables do not: no windows)."""
    pq = pyarrow_parquet()
    names = pq.read_schema(path).names
    return open_table(path, ("window_size",))["window_size"] if "window_size" in names else None


def mha_rows(path: Path) -> tuple[dict, dict]:
    """({head_dim: {(kernel, batch, seq, heads, kv, head_dim): ms}}, info) of one context
    attention table's bf16, unwindowed rows at sequence >= MIN_SEQ; malformed rows skipped and
    counted (info['skipped']), devices and the number of rows above `peak` checked by the
    caller."""
    data = open_table(path, MHA_COLUMNS)
    window = _window(path)
    out: dict[int, dict] = {}
    info: dict = {"devices": set(), "skipped": 0, "flops": {}}
    for i in range(len(data["latency"])):
        row = {c: data[c][i] for c in MHA_COLUMNS}
        if row["attn_dtype"] != "bfloat16" or row["kv_cache_dtype"] != "bfloat16":
            continue
        if window is not None and window[i]:
            continue
        if not _valid(row, MHA_COLUMNS[2:7]) or row["num_heads"] % row["num_key_value_heads"]:
            info["skipped"] += 1
            continue
        info["devices"].add(row["device"])
        if row["isl"] < MIN_SEQ:
            continue
        b, s, h, kv, d = (row[c] for c in MHA_COLUMNS[2:7])
        key = (row["kernel_source"], b, s, h, kv, d)
        out.setdefault(d, {})[key] = row["latency"]
        info["flops"][key] = causal_fwd_flops(b, s, h, d, d)
    return out, info


def mla_rows(path: Path) -> tuple[dict, dict]:
    """({(kernel, batch, seq, local heads, tp): ms}, info) of one context MLA table's bf16 rows at
    sequence >= MIN_SEQ (num_heads is the rank's heads: collector/trtllm/collect_mla.py)."""
    data = open_table(path, MLA_COLUMNS)
    out: dict = {}
    info: dict = {"devices": set(), "skipped": 0, "flops": {}}
    for i in range(len(data["latency"])):
        row = {c: data[c][i] for c in MLA_COLUMNS}
        if row["mla_dtype"] != "bfloat16" or row["kv_cache_dtype"] != "bfloat16":
            continue
        if not _valid(row, MLA_COLUMNS[2:6]):
            info["skipped"] += 1
            continue
        info["devices"].add(row["device"])
        if row["isl"] < MIN_SEQ:
            continue
        key = (row["kernel_source"], row["batch_size"], row["isl"], row["num_heads"],
               row["tp_size"])  # fmt: skip
        out[key] = row["latency"]
        info["flops"][key] = causal_fwd_flops(key[1], key[2], key[3], *MLA_DIMS)
    return out, info


def above_peak(times: dict, flops: dict, peak_tflops: float) -> int:
    """Rows faster than the dense bf16 peak allows (not one call's time)."""
    return sum(flops[k] / (ms * 1e9) > peak_tflops for k, ms in times.items())


def collection(data: Path, system: str, backend: str, version: str) -> dict | None:
    """One system's tables of one collection: {'mha': {head_dim: {key: ms}}, 'mla': {key: ms},
    'devices', 'skipped', 'left_out' (why, or None)}; None where it has neither table."""
    paths = {"mha": data / system / "attention" / backend / version / "context_attention_perf.parquet",
             "mla": data / system / "mla" / backend / version / "context_mla_perf.parquet"}  # fmt: skip
    if not any(p.is_file() for p in paths.values()):
        return None
    out: dict = {"mha": {}, "mla": {}, "devices": set(), "skipped": 0, "left_out": None}
    peak = models_zoo.load_gpu(SYSTEMS[system]).peak_bf16_tflops
    fast = 0
    for kind, path in paths.items():
        if not path.is_file():
            continue
        times, info = (mha_rows if kind == "mha" else mla_rows)(path)
        out[kind] = times
        out["devices"] |= info["devices"]
        out["skipped"] += info["skipped"]
        flat = {k: v for t in times.values() for k, v in t.items()} if kind == "mha" else times
        fast += above_peak(flat, info["flops"], peak)
    if any(not d.startswith(DEVICE_PREFIX[system]) for d in out["devices"]):
        out["left_out"] = f"rows carry device {sorted(out['devices'])}, not {DEVICE_PREFIX[system]}"
    elif fast:
        out["left_out"] = f"{fast} row(s) faster than its dense bf16 peak ({peak:g} TFLOP/s)"
    return out


def speeds(part: dict, ref: dict, kind: str, head_dim: int = 128, select=None) -> list[float]:
    """Per-shape speed of `part` over `ref` (ref time / part time) at the keys both hold."""
    a = part["mla"] if kind == "mla" else part["mha"].get(head_dim, {})
    b = ref["mla"] if kind == "mla" else ref["mha"].get(head_dim, {})
    return [b[k] / ms for k, ms in a.items() if k in b and (select is None or select(k))]


def fmt(values: list[float]) -> str:
    if not values:
        return "n 0"
    q = quantiles(values)
    return f"median {q['median']:.3f}, P10 {q['p10']:.3f}, P90 {q['p90']:.3f}, n {q['n']}"


def collections(data: Path) -> list[tuple[str, str]]:
    """(backend, version) folders holding an attention or MLA context table for any system."""
    found = set()
    for system in SYSTEMS:
        for p in (data / system).glob("attention/*/*/context_attention_perf.parquet"):
            found.add((p.parent.parent.name, p.parent.name))
        for p in (data / system).glob("mla/*/*/context_mla_perf.parquet"):
            found.add((p.parent.parent.name, p.parent.name))
    if not found:
        raise AicError(f"{data}: no <system>/attention or <system>/mla context tables (give "
                       "aiconfigurator's aic-core/src/aiconfigurator_core/systems/data folder)")
    return sorted(found)


KINDS = tuple(("mha", d, f"hd{d}") for d in HEAD_DIMS) + (("mla", 0, "mla 192/128"),)


def print_collections(data: Path) -> dict:
    """Sections 1 and 2; returns {(backend, version): {system: collection or None}}."""
    loaded: dict = {}
    for backend, version in collections(data):
        systems = {s: collection(data, s, backend, version) for s in SYSTEMS}
        held = ", ".join(f"{s} {sorted(c['devices'])}" for s, c in systems.items() if c)
        print(f"\n== {backend} {version}: {held}")
        for s, c in systems.items():
            if c and c["skipped"]:
                print(f"  skipped {c['skipped']} malformed row(s) of {s}")
            if c and c["left_out"]:
                print(f"  left out: {s}: {c['left_out']}")
                systems[s] = None
        loaded[(backend, version)] = systems
        for a, b in PAIRS:
            if systems[a] is None or systems[b] is None:
                continue
            for kind, d, label in KINDS:
                r = speeds(systems[a], systems[b], kind, d)
                if r:
                    print(f"  {a} / {b} {label:11s} speed: {fmt(r)}")
    return loaded


def stability(loaded: dict, system: str, kind: str, d: int) -> list[tuple[str, float]]:
    """(collection, median speed vs the flagship) for every collection holding both."""
    ref = FLAGSHIP[models_zoo.load_gpu(SYSTEMS[system]).generation]
    cells = []
    for (backend, version), systems in loaded.items():
        if systems.get(system) is None or systems.get(ref) is None:
            continue
        r = speeds(systems[system], systems[ref], kind, d)
        if r:
            cells.append((f"{backend} {version}", statistics.median(r)))
    return cells


def print_stability(loaded: dict) -> None:
    print("\n== speed vs flagship (flagship time / part time, median over the shape set) "
          "per collection")
    for system, gpu_id in SYSTEMS.items():
        if system == FLAGSHIP[models_zoo.load_gpu(gpu_id).generation]:
            continue
        for kind, d, label in (KINDS[0], KINDS[-1]):
            cells = stability(loaded, system, kind, d)
            if cells:
                vals = [v for _, v in cells]
                print(f"  {system} {label:11s}: " + ", ".join(f"{c} {v:.3f}" for c, v in cells)
                      + f"  | range {min(vals):.3f}-{max(vals):.3f}")


SUBSETS = {
    "seq 2-4K": lambda k: k[2] <= 4096,
    "seq 8-16K": lambda k: k[2] >= 8192,
    "batch <= 4": lambda k: k[1] <= 4,
    "batch > 4": lambda k: k[1] > 4,
}


def print_subsets(systems: dict, name: str) -> None:
    print(f"\n== shape subsets, {name} (median speed, count)")
    for a, b in PAIRS:
        if systems.get(a) is None or systems.get(b) is None:
            continue
        for kind, d, label in (KINDS[0], KINDS[-1]):
            cells = []
            for sub, select in SUBSETS.items():
                r = speeds(systems[a], systems[b], kind, d, select)
                cells.append(f"{sub} {statistics.median(r):.3f} ({len(r)})" if r else f"{sub} -")
            print(f"  {a} / {b} {label}: " + "; ".join(cells))


def print_presets(systems: dict, name: str) -> None:
    """Section 5: shipped values, the reference collection's medians, the priced speeds."""
    print(f"\n== presets vs measured ({name}); speed vs the generation's flagship")
    for system, gpu_id in SYSTEMS.items():
        gpu = models_zoo.load_gpu(gpu_id)
        ref = FLAGSHIP[gpu.generation]
        shipped = gpu.attention_speed_vs_flagship
        fwd, fwd_mla, bwd = attention_speeds(gpu)
        a, b = systems.get(system), systems.get(ref)
        cells = []
        for kind, d, label in (KINDS[0], KINDS[-1]):
            r = speeds(a, b, kind, d) if a and b and a is not b else []
            cells.append(f"aic {label} {statistics.median(r):.3f}" if r else f"aic {label} -")
        ship = "-" if shipped is None else f"{shipped.forward:.3f} / MLA " + (
            "-" if shipped.forward_mla is None else f"{shipped.forward_mla:.3f}"
        )
        print(f"  {gpu_id:16s}: shipped forward {ship}; priced forward {fwd:.3f}, MLA forward "
              f"{fwd_mla:.3f}, backward {bwd:.3f}; " + ", ".join(cells))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path, help="aiconfigurator's systems/data folder")
    p.add_argument("--reference", default="trtllm/1.3.0rc20", help="backend/version for 4-5")
    args = p.parse_args(argv)
    try:
        pyarrow_parquet()
        print(f"shape set: {SHAPE_SET}; speed = reference time / part time at the same key")
        loaded = print_collections(args.data)
        print_stability(loaded)
        ref = tuple(args.reference.split("/", 1))
        if ref not in loaded:
            raise AicError(f"--reference {args.reference}: no such collection under {args.data}")
        print_subsets(loaded[ref], args.reference)
        print_presets(loaded[ref], args.reference)
    except AicError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
