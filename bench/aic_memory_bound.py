"""Achieved bandwidth of streaming kernels per GPU from aiconfigurator's measured quantize tables
(issue 32: memory-bound ops per GPU from measurements; the Blackwell parts have no table).

NVIDIA's aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) times, with one collector
per framework on every system it ships, the static fp8 quantization of a bf16 activation x[m, k]
(aic-core/src/aiconfigurator_core/systems/data/<system>/quantize/<backend>/<version>/
scale_matrix_perf.parquet, collector/<backend>/collect_computescale.py: x = randn(m, k) bf16, five
calls per CUDA graph replay, latency per call). That is a pure streaming kernel whose bytes follow
from the shape (KERNELS says which kernel each backend runs and what it moves):

- trtllm: torch.ops.tensorrt_llm.static_quantize_e4m3_per_tensor, TensorRT-LLM
  cpp/tensorrt_llm/common/cudaFp8Utils.cu scaleMatrixPerTensorVec: each thread loads 8 bf16
  (16 B) and stores 8 e4m3 (8 B): 3 B per element; grid min(ceil(m k / 2,048), 65,536) blocks of
  256, so up to 2^27 elements every thread moves one vector and exits (one-shot, as PyTorch's
  vectorized elementwise kernels and Transformer Engine's pointwise kernels run at training
  sizes), above it a grid-stride loop (the rows show the kink at 2^27 on every part);
- vllm: vllm._custom_ops.scaled_fp8_quant with a per-tensor static scale (its CUDA kernel,
  per token row): 3 B per element;
- sglang: an eager PyTorch chain, out.copy_((x / scale).clamp(...).to(float8_e4m3fn)) with a
  one-element fp32 scale (not 0-dim, so the division promotes to fp32): four kernels, div 2 + 4,
  clamp 4 + 4, cast 4 + 1, copy 1 + 1 = 21 B per element.

This script prints, per system and collection, the achieved bandwidth (bytes above / latency) as a
fraction of the part's datasheet HBM bandwidth (models_zoo/gpus/*.json) by input size (below
32 MB a call is launch-bound; ONE_SHOT: 32 MB to 2^27 elements, the training activation sizes;
LARGE: above), the stability across collections, the H100 / H200 values against this project's
measured memory_bound.csv (the control), the H100 table's ops carried to each part by the
part / H100 time of the same aiconfigurator kernel at the same shape (the chain; the H200's own
measured table is its check), and the value each GPU preset prices (hbm_efficiency of its
generation, or its measured GpuSpec.hbm_streaming_efficiency) next to the value that field would
take from the reference collection.

Usage: python bench/aic_memory_bound.py AIC_SYSTEMS_DATA [--reference trtllm/1.3.0rc20]
(only <system>/quantize is read). Needs pyarrow (pip install pyarrow).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from aic_gemm_check import AicError, pyarrow_parquet
from aic_gpu_speeds import DEVICE_PREFIX, SKIPPED, SYSTEMS, quantiles, read_rows

import models_zoo
from cost_models.calibration import generation_for_gpu

KERNELS = {
    "trtllm": (3, "TensorRT-LLM scaleMatrixPerTensorVec (bf16 read 2 B + e4m3 write 1 B)"),
    "vllm": (3, "vLLM static scaled_fp8_quant (bf16 read 2 B + e4m3 write 1 B)"),
    "sglang": (21, "eager PyTorch div/clamp/cast/copy_ chain (2+4, 4+4, 4+1, 1+1 B)"),
}
"""Bytes moved per element of x and what moves them (module docstring)."""
MIN_BYTES = 32e6
"""Input bytes below which a call is launch-bound (a few microseconds at these bandwidths)."""
ONE_SHOT_ELEMENTS = 2**27
"""TensorRT-LLM's grid cap (65,536 blocks x 256 threads x 8 elements): up to here each thread of
its kernel moves one vector, as PyTorch's and Transformer Engine's elementwise kernels do."""
BINS = {
    "one-shot": lambda m, k: m * k * 2 >= MIN_BYTES and m * k <= ONE_SHOT_ELEMENTS,
    "large": lambda m, k: m * k > ONE_SHOT_ELEMENTS,
}
"""Size bins of x [m, k] bf16: training's activation sizes (32 MB - 268 MB), and above."""
H100_TABLE = ROOT / "models_zoo" / "kernels" / "h100-sxm-80gb" / "memory_bound.csv"
H200_TABLE = ROOT / "models_zoo" / "kernels" / "h200-sxm-141gb" / "memory_bound.csv"
ELEMENTWISE_OPS = ("copy", "add", "gelu")
"""The H100 table's single-kernel streaming ops (the control compares them with aic's kernel)."""


def scale_matrix(data: Path, system: str, backend: str, version: str) -> dict | None:
    """{(m, k): ms} of one collection's scale_matrix table, with its devices; None where the
    folder holds none. Rows filed under one system but measured on another are flagged."""
    path = data / system / "quantize" / backend / version / "scale_matrix_perf.parquet"
    if not path.is_file():
        return None
    rows = read_rows(path, ("device", "m", "k", "latency"), lambda r: True)
    devices = sorted({r["device"] for r in rows})
    return {
        "devices": devices,
        "skipped": SKIPPED.get(str(path), 0),
        "mislabelled": any(not d.startswith(DEVICE_PREFIX[system]) for d in devices),
        "ms": {(r["m"], r["k"]): r["latency"] for r in rows},
    }


def datasheet_gb_per_s(system: str) -> float:
    return models_zoo.load_gpu(SYSTEMS[system]).hbm_bandwidth_gb_per_s


def fractions(table: dict, backend: str, system: str, size: str) -> list[float]:
    """Achieved / datasheet HBM bandwidth of the rows in size bin `size`."""
    per_elem, _ = KERNELS[backend]
    sheet = datasheet_gb_per_s(system) * 1e9
    keep = BINS[size]
    return [
        per_elem * m * k / (ms * 1e-3) / sheet for (m, k), ms in table["ms"].items() if keep(m, k)
    ]


def collections(data: Path) -> list[tuple[str, str]]:
    """(backend, version) folders holding a scale_matrix table for any system."""
    found = {
        (p.parent.parent.name, p.parent.name)
        for s in SYSTEMS
        for p in (data / s / "quantize").glob("*/*/scale_matrix_perf.parquet")
    }
    if not found:
        raise AicError(f"{data}: no <system>/quantize/*/*/scale_matrix_perf.parquet (give "
                       "aiconfigurator's systems/data folder)")  # fmt: skip
    return sorted(b for b in found if b[0] in KERNELS)


def cell(q: dict | None) -> str:
    if not q or not q["n"]:
        return "-"
    return f"{q['median']:.3f} ({q['p10']:.3f}-{q['p90']:.3f}, n {q['n']})"


def load_all(data: Path) -> dict:
    """{(backend, version): {system: table or None}}, mislabelled systems left out (printed)."""
    loaded: dict = {}
    for backend, version in collections(data):
        systems = {s: scale_matrix(data, s, backend, version) for s in SYSTEMS}
        for s, t in systems.items():
            if t and t["mislabelled"]:
                print(f"  left out: {backend} {version} {s}'s rows carry device {t['devices']}")
                systems[s] = None
            elif t and t["skipped"]:
                print(f"  skipped {t['skipped']} malformed row(s) of {backend} {version} {s}")
        loaded[(backend, version)] = systems
    return loaded


def print_fractions(loaded: dict) -> dict:
    """Section 1: per collection and system, the fraction per size bin; returns
    {(backend, version): {system: one-shot median}}."""
    print("\n== achieved / datasheet HBM bandwidth: median (P10-P90, n) per size bin")
    medians: dict = {}
    for (backend, version), systems in loaded.items():
        print(f"-- {backend} {version}: {KERNELS[backend][1]}")
        for s, t in systems.items():
            if t is None:
                continue
            q = {b: quantiles(fractions(t, backend, s, b)) for b in BINS}
            if q["one-shot"]["n"]:
                medians.setdefault((backend, version), {})[s] = q["one-shot"]["median"]
            print(f"  {s:9s} {t['devices'][0]:22s} one-shot {cell(q['one-shot'])}; "
                  f"large {cell(q['large'])}")  # fmt: skip
    return medians


def print_stability(medians: dict) -> None:
    """Section 2: one-shot medians per part over collections, and over the H100's (the same
    kernel on both): how much of a Hopper fraction the part reaches."""
    print("\n== one-shot median per collection; in brackets part / H100 of the same collection")
    for s in SYSTEMS:
        cells = []
        for (backend, version), per in medians.items():
            if s in per:
                h = per.get("h100_sxm")
                rel = f" [{per[s] / h:.3f}]" if h else ""
                cells.append(f"{backend} {version} {per[s]:.3f}{rel}")
        if cells:
            print(f"  {s:9s}: " + "; ".join(cells))


def read_table(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [
            {"op": r["op"], "m": int(r["tokens"]), "k": int(r["width"]),
             "gb_per_s": float(r["gb_per_s"])}
            for r in csv.DictReader(f)
        ]  # fmt: skip


def print_control(medians: dict) -> None:
    """Section 3: this project's measured H100 / H200 single-kernel streaming ops next to aic's."""
    print("\n== control: measured memory_bound.csv (copy, add, gelu) / datasheet vs aic one-shot")
    for system, path in (("h100_sxm", H100_TABLE), ("h200_sxm", H200_TABLE)):
        sheet = datasheet_gb_per_s(system)
        own = [r["gb_per_s"] / sheet for r in read_table(path) if r["op"] in ELEMENTWISE_OPS]
        aic = ", ".join(f"{b} {v} {per[system]:.3f}" for (b, v), per in medians.items()
                        if system in per)  # fmt: skip
        print(f"  {system}: measured median {statistics.median(own):.3f} "
              f"({min(own):.3f}-{max(own):.3f}, n {len(own)}); aic {aic}")  # fmt: skip


def nearest(table: dict, m: int, k: int, other: dict) -> tuple[int, int] | None:
    """(m, k) itself where both tables hold it, else the same m with the nearest k both hold."""
    if (m, k) in table and (m, k) in other:
        return m, k
    ks = [kk for (mm, kk) in table if mm == m and (m, kk) in other]
    return (m, min(ks, key=lambda z: abs(z - k))) if ks else None


def chain(systems: dict, system: str) -> dict[str, list[float]]:
    """Per op of the measured H100 table: its GB/s times aic's H100 time / part time at that
    shape (nearest k), over the part's datasheet."""
    part, h100 = systems.get(system), systems.get("h100_sxm")
    if not part or not h100:
        return {}
    out: dict[str, list[float]] = {}
    for r in read_table(H100_TABLE):
        key = nearest(part["ms"], r["m"], r["k"], h100["ms"])
        if key is None:
            continue
        speed = h100["ms"][key] / part["ms"][key]
        out.setdefault(r["op"], []).append(r["gb_per_s"] * speed / datasheet_gb_per_s(system))
    return out


def print_chain(loaded: dict) -> None:
    """Section 4: the H100 table carried to each part per collection (median per op); the H200
    line is checked against the H200's own measured table."""
    print("\n== H100 table x aic H100 time / part time, over the part's datasheet (median per op)")
    own = {}
    for r in read_table(H200_TABLE):
        own.setdefault(r["op"], []).append(r["gb_per_s"] / datasheet_gb_per_s("h200_sxm"))
    print("  h200 measured table: "
          + " ".join(f"{op} {statistics.median(v):.3f}" for op, v in own.items()))  # fmt: skip
    for (backend, version), systems in loaded.items():
        for s in SYSTEMS:
            if s == "h100_sxm":
                continue
            per_op = chain(systems, s)
            if per_op:
                ops = " ".join(f"{op} {statistics.median(v):.3f}" for op, v in per_op.items())
                print(f"  {backend} {version} {s:9s}: {ops}")


def print_presets(medians: dict, reference: tuple[str, str]) -> None:
    """Section 5: what each preset prices a streaming kernel at, and the value a part's
    GpuSpec.hbm_streaming_efficiency would take from the reference collection (its one-shot
    median: docs/calibration.md "Streaming kernels per part" says why no preset carries it)."""
    per = medians.get(reference, {})
    print(f"\n== presets: priced achieved / datasheet HBM bandwidth of streaming kernels; "
          f"measured one-shot median ({' '.join(reference)})")  # fmt: skip
    for system, gpu_id in SYSTEMS.items():
        gpu = models_zoo.load_gpu(gpu_id)
        field = getattr(gpu, "hbm_streaming_efficiency", None)
        priced = generation_for_gpu(gpu).hbm_efficiency
        basis = "measured (GpuSpec.hbm_streaming_efficiency)" if field else "generation constant"
        found = f"{per[system]:.3f}" if system in per else "-"
        print(f"  {gpu_id:16s} {priced:.3f} x {gpu.hbm_bandwidth_gb_per_s:,.0f} GB/s: {basis}; "
              f"measured {found}")  # fmt: skip


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path, help="aiconfigurator's systems/data folder")
    p.add_argument("--reference", default="trtllm/1.3.0rc20", help="backend/version for section 5")
    args = p.parse_args(argv)
    try:
        pyarrow_parquet()
        loaded = load_all(args.data)
        medians = print_fractions(loaded)
        print_stability(medians)
        print_control(medians)
        print_chain(loaded)
        print_presets(medians, tuple(args.reference.split("/", 1)))
    except AicError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
