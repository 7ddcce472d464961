"""aiconfigurator's measured NCCL tables against the NVLink tier the cluster presets assume
(issue 32).

aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships nccl-tests runs its
collector took on one node of each system (`systems/data/<system>/comm/nccl/<version>/
nccl_perf.parquet`; planner/calibrate/aic_nccl.py says how they were taken and reads them). This
script prints, for each file:

1. per collective and GPU count, the bus bandwidth measured at 1 MiB, 16 MiB, 128 MiB and 512 MiB
   and the preset's modelled time over the measured one (< 1: the preset is optimistic);
2. the NVLink tier's (efficiency, latency) that `planner calibrate --aiconfigurator-nccl` fits
   on the whole file, and on the groups of each GPU count alone, beside the preset's.

Usage: python bench/aic_nccl_check.py AIC_SYSTEMS_DATA_DIR (pyarrow needed)
"""

from __future__ import annotations

import sys
from pathlib import Path

import models_zoo
from cost_models.errors import InvalidInput
from planner.calibrate import aic_nccl, nccl

PRESETS = {"h100_sxm": "dgx-h100", "h200_sxm": "dgx-h200", "b200_sxm": "dgx-b200",
           "b300_sxm": "dgx-b300", "gb200": "gb200-nvl72", "gb300": "gb300-nvl72"}
SIZES = (1 << 20, 1 << 24, 1 << 27, 1 << 29)


def _label(size: int) -> str:
    return f"{size >> 20} MiB"


def curves(logs: list[nccl.NcclLog], cluster) -> None:
    for log in logs:
        span = nccl._span(log.ranks, cluster, len(cluster.tiers) - 1, log.num_nodes)
        cells = []
        for r in log.rows:
            if r.size_bytes in SIZES:
                model = nccl.model_time_s(log.collective, r.size_bytes, log.ranks,
                                          cluster.tiers, span)
                cells.append(f"{_label(r.size_bytes)} {r.busbw_gb_per_s:.0f} GB/s "
                             f"(model / measured {model / (r.time_us * 1e-6):.2f})")
        print(f"  {log.collective} x{log.ranks}: " + ", ".join(cells))


def fits(logs: list[nccl.NcclLog], cluster) -> None:
    tier = cluster.tiers[0]
    groups = {"every group": logs}
    for n in sorted({log.ranks for log in logs}):
        groups[f"{n} GPUs"] = [log for log in logs if log.ranks == n]
    for name, sel in groups.items():
        try:
            fit = nccl.fit_tier(sel, cluster, 0)
        except InvalidInput as err:
            print(f"  fit on {name}: {err}")
            continue
        print(f"  fit on {name}: efficiency {fit.efficiency:.3f}, latency {fit.latency_us:.2f} us "
              f"({fit.points} points, max residual {fit.max_residual_pct:.0f} %); preset "
              f"{tier.efficiency:g}, {tier.latency_us:g} us at {tier.bandwidth_gb_per_s:g} GB/s")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    files = sorted(Path(argv[0]).glob("*/comm/nccl/*/nccl_perf.parquet"))
    if not files:
        print(f"error: {argv[0]}: no */comm/nccl/*/nccl_perf.parquet", file=sys.stderr)
        return 2
    for path in files:
        system, version = path.parents[3].name, path.parent.name
        if system not in PRESETS:
            continue
        cluster = models_zoo.load_cluster(PRESETS[system])
        try:
            logs = aic_nccl.read_nccl_perf(str(path))
        except InvalidInput as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"{system} NCCL {version} ({logs[0].gpu_name or 'no device column'}) "
              f"vs {cluster.name}:")
        curves(logs, cluster)
        fits(logs, cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
