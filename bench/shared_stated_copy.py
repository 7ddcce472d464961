"""Write a copy of ../shared/data/published_runs.yaml with the settings its records' software ran
but the records do not state, for the data owner to weigh (docs/accuracy.md "Unfused attention in
the 2020-2021 Megatron-LM records"). Evidence only: the product never reads this copy, and
bench/fit_calibration.py fits the shipped constants on the shared file as it is.

Stated, by record id (each reason is the software's date against the kernel's, read in the
frameworks' history, not in the records' text):
- megatron2020-* (Megatron-LM README, 2020-09) and megatron2021-* (Narayanan et al., SC21):
  `attention_kernel: unfused` (Megatron-LM integrated FlashAttention on 2022-12-08, commit
  d693034ecf "Integrate FlashAttention into Megatron-LM"; before it ParallelAttention ran
  baddbmm, FusedScaleMaskSoftmax, attention dropout, bmm) and, with --stated-dropout,
  `model.hidden_dropout: true` (Megatron-LM's --hidden-dropout / --attention-dropout default 0.1
  then as now; the GPT examples of the time did not override them);
- mosaic-mpt-* (rows of llm-foundry's benchmark tables): `attention_kernel: flash1` (the tables'
  sweeps ran submit_benchmarks.py's --attn_impl default, 'triton': bench/heldout/
  make_foundry_summary.py attn_impl_of).

Usage: python bench/shared_stated_copy.py OUT.yaml [--stated-dropout] [--data PATH]
then: planner validate --data OUT.yaml --json; python bench/fit_calibration.py --data OUT.yaml
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "published_runs.yaml"
UNFUSED = ("megatron2020-", "megatron2021-")
FLASH1 = ("mosaic-mpt-",)


def stated_copy(records: list[dict], dropout: bool) -> tuple[list[dict], list[str]]:
    """(records with the settings stated, ids changed)."""
    changed = []
    for r in records:
        kernel = "unfused" if r["id"].startswith(UNFUSED) else None
        kernel = "flash1" if r["id"].startswith(FLASH1) else kernel
        if kernel is None:
            continue
        r["settings"] = {**(r.get("settings") or {}), "attention_kernel": kernel}
        if dropout and kernel == "unfused":
            r["model"]["hidden_dropout"] = True
        changed.append(r["id"])
    return records, changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--data", default=str(SHARED))
    ap.add_argument("--stated-dropout", action="store_true")
    args = ap.parse_args(argv)
    records = yaml.safe_load(Path(args.data).read_text())
    records, changed = stated_copy(records, args.stated_dropout)
    Path(args.out).write_text(yaml.safe_dump(records, sort_keys=False))
    print(f"{args.out}: {len(changed)} of {len(records)} records state a setting")
    for rid in changed:
        print(f"  {rid}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
