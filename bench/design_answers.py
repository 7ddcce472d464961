"""The `planner design` answers of docs/networks.md, run and recorded (bench/results/design_answers.json).

Each case is one `planner design` command of the page: the whole default space for the 16,384-H100
mix, then the four narrower questions (docs/design/*.yaml, `--no-prune`). A case runs twice on one
cache folder: `--json` first (every design point computed; its wall and CPU time are recorded),
then the text report at the page's terminal width (every point read back from the cache, so the
text is the same evaluation's). The cases share the cache, as on the page: a narrow question reads
the points it shares with the default space.

A full run takes minutes of CPU (the default space: 66 plan searches at 16,384 GPUs), so the page's
blocks are rendered from the record (bench/docs_figures.py: `design-*` blocks) and a slow test
(tests/integration/test_docs_figures.py) re-runs a cheap part: the bill and $ per million tokens
of every recorded design from its recorded throughput.

Usage: python bench/design_answers.py --record bench/results/design_answers.json [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from revision import revision as _revision  # bench/revision.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
MIX = "--workload docs/design/mix-405b-dsv3.yaml --gpus 16384"
CASES: list[tuple[str, str, int]] = [
    # (name, planner design arguments, terminal columns of the page's block)
    ("default", f"{MIX} --gpu h100-sxm-80gb", 120),
    ("ib-vs-roce", f"{MIX} --gpu h100-sxm-80gb --designs docs/design/ib-vs-roce.yaml --no-prune", 100),
    ("rail-only", f"{MIX} --gpu h100-sxm-80gb --designs docs/design/rail-only.yaml --no-prune", 100),
    ("nic-speed", f"{MIX} --gpu h100-sxm-80gb --designs docs/design/nic-speed.yaml --no-prune", 100),
    ("nvl72", f"{MIX} --gpu gb200 --designs docs/design/nvl72.yaml --no-prune", 100),
]  # fmt: skip


def _planner(args: str, columns: int, cache: str, workers: int) -> tuple[str, float, float]:
    """stdout of `planner design ARGS --workers K --cache-dir CACHE`, wall and CPU seconds (the
    CPU of the command and its worker processes)."""
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    cmd = [sys.executable, "-m", "planner", "design", *shlex.split(args)]
    cmd += ["--workers", str(workers), "--cache-dir", cache]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"planner design {args}: exit {done.returncode}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return "\n".join(line.rstrip() for line in done.stdout.splitlines()), wall, cpu


ESTIMATE_KEPT = ("step_time_s", "tokens_per_s_per_gpu", "mfu", "breakdown_s")


def _trimmed(answer: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer without each design's cluster file (rebuilt from `design` by the space)
    and with each plan's estimate cut to its step, throughput, MFU and breakdown."""

    def plan(p: dict[str, Any]) -> dict[str, Any]:
        est = p.get("estimate") or {}
        return {**p, "estimate": {k: est[k] for k in ESTIMATE_KEPT if k in est}}

    designs = [
        {**{k: v for k, v in d.items() if k != "cluster"}, "plans": [plan(p) for p in d["plans"]]}
        for d in answer["designs"]
    ]
    return {**answer, "designs": designs}


def run(only: list[str] | None, workers: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="design-answers-") as cache:
        for name, args, columns in CASES:
            if only and name not in only:
                continue
            printed, wall, cpu = _planner(args + " --json", columns, cache, workers)
            text, _, _ = _planner(args, columns, cache, workers)
            rows.append(
                {
                    "name": name,
                    "args": args,
                    "columns": columns,
                    "workers": workers,
                    "wall_s": round(wall, 1),
                    "cpu_s": round(cpu, 1),
                    "load_average": list(os.getloadavg()),
                    "text": text,
                    "json": _trimmed(json.loads(printed)),
                }
            )
            print(f"{name}: {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    return rows


# ------------------------------------------------------------------ the page's blocks (record)


def _case(record: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in record["cases"] if c["name"] == name)


def _command(c: dict[str, Any]) -> str:
    return f"planner design {c['args']}"


def text_block(c: dict[str, Any]) -> str:
    """The report as the page shows it: the default space from its first line down to the best
    design's plans; a narrow question from the frontier down to the table of every design."""
    lines = c["text"].splitlines()
    if c["name"] == "default":
        start, stop = 0, lines.index(next(x for x in lines if x.startswith("Evaluated designs")))
    else:
        start = lines.index(next(x for x in lines if x.startswith("Frontier")))
        stop = lines.index(next(x for x in lines if x.startswith("Cost assumptions")))
    body = "\n".join(lines[start:stop]).strip("\n")
    return f"`{_command(c)}`:\n\n```\n{body}\n```"


def _by_name(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in c["json"]["designs"]}


def _w(d: dict[str, Any], i: int) -> float:
    """Tokens/s/GPU of workload i (mix order) on design d."""
    return d["plans"][i]["estimate"]["tokens_per_s_per_gpu"]


def _share(d: dict[str, Any], i: int, term: str) -> float:
    est = d["plans"][i]["estimate"]
    return est["breakdown_s"][term] / est["step_time_s"]


def _pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.1f} %"


def _gpu_hour(c: dict[str, Any]) -> float:
    return c["json"]["assumptions"]["gpu_hour_usd"]["value"]


def default_facts(record: dict[str, Any]) -> str:
    """The default space: its counts, the run's time, the frontier's ends and the best design."""
    c = _case(record, "default")
    j = c["json"]
    front = [j["designs"][i] for i in j["frontier"]]
    best = j["designs"][j["best"]]
    sk = j["search"]["skipped"]
    load = ", ".join(f"{x:.1f}" for x in c["load_average"])

    def point(d: dict[str, Any]) -> str:
        return f"`{d['name']}` (${d['network_capex_usd_per_gpu']:,.0f} of network per GPU, " \
            f"{d['tokens_per_s_per_gpu']:,.1f} tokens/s/GPU"
    four = [d for d in j["designs"] if d["design"]["oversubscription"][:1] == [4.0]]
    one = {(d["design"]["technology"], d["design"]["nic_gbps"], d["design"]["fabric"]): d
           for d in j["designs"] if d["design"]["oversubscription"][:1] == [1.0]}  # fmt: skip
    losses = [
        d["tokens_per_s_per_gpu"] / one[k]["tokens_per_s_per_gpu"] - 1
        for d in four
        if (k := (d["design"]["technology"], d["design"]["nic_gbps"], d["design"]["fabric"])) in one
    ]
    return (
        f"{j['search']['designs']} designs, {j['search']['evaluated']} evaluated "
        f"({j['search']['evaluated'] * len(j['workloads'])} plan searches), {sk['dominated']} "
        f"dominated, {sk['bounded']} bounded, {sk['infeasible']} infeasible (JSON `skipped` names "
        f"the design that rules each out). Recorded by `{record['command']}` on revision "
        f"{record['revision']} ({record['note']}): {c['wall_s']:,.0f} s wall ({c['cpu_s']:,.0f} s of "
        f"CPU), `--workers {c['workers']} --cache-dir DIR` with an empty cache, load average "
        f"{load} at the end; the answers below read the points they share with it from that "
        f"cache. The frontier runs from {point(front[0])}) to {point(front[-1])}); the best $ per "
        f"million tokens is {point(best)}, ${best['usd_per_m_tokens']:.4f}). At 4:1, a design "
        f"loses {-max(losses) * 100:.1f}-{-min(losses) * 100:.1f} % of the mix's throughput "
        f"against its 1:1 twin ({len(losses)} pairs)."
    )


def ib_vs_roce_facts(record: dict[str, Any]) -> str:
    """Answer 1: InfiniBand's speed against its price, and the break-even network cost."""
    c = _case(record, "ib-vs-roce")
    d = _by_name(c)
    ib, roce = d["ib-400g-rail-1:1-nvl8"], d["roce-400g-rail-1:1-nvl8"]
    g = _gpu_hour(c)
    t_ib, t_roce = ib["tokens_per_s_per_gpu"], roce["tokens_per_s_per_gpu"]
    h_ib, h_roce = ib["network_usd_per_gpu_hour"], roce["network_usd_per_gpu_hour"]
    even = (g + h_roce) * t_ib / t_roce - g
    winner, loser = sorted((ib, roce), key=lambda x: x["usd_per_m_tokens"])
    tco = 2.3  # the hyperscaler's ratio of network TCO quoted below
    need = (g + tco * h_roce) / (g + h_roce) - 1
    return (
        f"InfiniBand is {_pct(t_ib, t_roce)} over the mix (Llama 3.1 405B "
        f"{_pct(_w(ib, 0), _w(roce, 0))}, DeepSeek-V3 {_pct(_w(ib, 1), _w(roce, 1))}) for "
        f"{ib['network_capex_usd_per_gpu'] / roce['network_capex_usd_per_gpu']:.3f}x the "
        f"network's capital and {h_ib / h_roce:.3f}x its cost per GPU-hour (${h_ib:.4f} against "
        f"${h_roce:.4f}: capital over {c['json']['assumptions']['amortization_years']['value']:g} "
        f"years plus energy). InfiniBand wins where its network costs less than "
        f"({g:.2f} + {h_roce:.4f}) x {t_ib:.1f} / {t_roce:.1f} - {g:.2f} = ${even:.4f} per "
        f"GPU-hour, **{even / h_roce:.3f}x RoCE's**; at the price list's {h_ib / h_roce:.3f}x, "
        f"`{winner['name']}` wins by "
        f"{(loser['usd_per_m_tokens'] / winner['usd_per_m_tokens'] - 1) * 100:.2f} % "
        f"(${winner['usd_per_m_tokens']:.4f} against ${loser['usd_per_m_tokens']:.4f} per million "
        f"tokens). The other way round, InfiniBand at the hyperscaler's ~{tco:g}x network TCO "
        f"would need ({g:.2f} + {tco:g} x {h_roce:.4f}) / ({g:.2f} + {h_roce:.4f}) - 1 = "
        f"**{need * 100:.1f} % more throughput** to win."
    )


def rail_only_facts(record: dict[str, Any]) -> str:
    """Answer 2: rail-only against the rail-optimised fat-tree, and the terms that decide."""
    c = _case(record, "rail-only")
    d = _by_name(c)
    ro, ft = d["ib-400g-rail-only-nvl8"], d["ib-400g-rail-1:1-nvl8"]
    dense, moe = ro["plans"][0]["decides"], ro["plans"][1]["decides"]
    ep = ro["plans"][1]["layout"]["ep"]
    return (
        f"Llama 3.1 405B runs at {_w(ro, 0):,.1f} tokens/s/GPU on rail-only and {_w(ft, 0):,.1f} "
        f"on the fat-tree, DeepSeek-V3 at {_w(ro, 1):,.1f} and {_w(ft, 1):,.1f} (rail-only "
        f"{(ro['tokens_per_s_per_gpu'] / ft['tokens_per_s_per_gpu'] - 1) * 100:+.3f} % over the "
        f"mix), and rail-only costs ${ro['network_capex_usd_per_gpu']:,.0f} of network per GPU "
        f"against ${ft['network_capex_usd_per_gpu']:,.0f} "
        f"({_pct(ro['network_capex_usd_per_gpu'], ft['network_capex_usd_per_gpu'])}). The "
        f"deciding terms on rail-only: the dense model's {dense['term']} "
        f"({dense['share_of_step'] * 100:.1f} % of the step over {dense['tier']}), the MoE's "
        f"{moe['term']} ({moe['share_of_step'] * 100:.1f} % over {moe['tier']}); the MoE plan's "
        f"EP group is {ep:,} GPUs, a leaf group {ro['design']['leaf_gpus']:,}."
    )


def nic_speed_facts(record: dict[str, Any]) -> str:
    """Answer 3: 800G against 400G per GPU, and the GPU-hour price from which it pays."""
    c = _case(record, "nic-speed")
    d = _by_name(c)
    g = _gpu_hour(c)
    parts = []
    for tech, label in (("ib", "InfiniBand"), ("roce", "RoCE")):
        a, b = d[f"{tech}-400g-rail-1:1-nvl8"], d[f"{tech}-800g-rail-1:1-nvl8"]
        t4, t8 = a["tokens_per_s_per_gpu"], b["tokens_per_s_per_gpu"]
        h4, h8 = a["network_usd_per_gpu_hour"], b["network_usd_per_gpu_hour"]
        pays = (h8 * t4 - h4 * t8) / (t8 - t4)
        parts.append(
            f"{label}: {_pct(t8, t4)} over the mix (405B {_pct(_w(b, 0), _w(a, 0))}, "
            f"DeepSeek-V3 {_pct(_w(b, 1), _w(a, 1))}) for "
            f"{b['network_capex_usd_per_gpu'] / a['network_capex_usd_per_gpu']:.2f}x the "
            f"network capital, $ per million tokens {_pct(b['usd_per_m_tokens'], a['usd_per_m_tokens'])}; "
            f"800G pays for itself above a GPU-hour of (h800 T400 - h400 T800) / (T800 - T400) "
            f"= ${pays:.2f}"
        )
    a, b = d["ib-400g-rail-1:1-nvl8"], d["ib-800g-rail-1:1-nvl8"]
    h4, h8 = a["network_usd_per_gpu_hour"], b["network_usd_per_gpu_hour"]
    t4, t8 = _w(a, 0), _w(b, 0)
    dense = (h8 * t4 - h4 * t8) / (t8 - t4)
    return (
        "; ".join(parts) + f" (T the throughput, h the network's cost per GPU-hour). For the "
        f"dense 405B alone (InfiniBand) it is {_pct(t8, t4)} for "
        f"{_pct(b['network_capex_usd_per_gpu'], a['network_capex_usd_per_gpu'])} of network "
        f"capital, which pays only above (${h8:.4f} x {t4:.1f} - ${h4:.4f} x {t8:.1f}) / "
        f"{t8 - t4:.1f} = ${dense:.2f} per GPU-hour (at ${g:.2f} here)."
    )


def nvl72_facts(record: dict[str, Any]) -> str:
    """Answer 4: NVL72 against 8-GPU NVLink domains, and the terms that move."""
    c = _case(record, "nvl72")
    d = _by_name(c)
    n8, n72 = d["ib-400g-rail-1:1-nvl8"], d["ib-400g-rail-1:1-nvl72"]

    def lay(x: dict[str, Any], i: int) -> dict[str, Any]:
        return x["plans"][i]["layout"]

    return (
        f"NVL72: DeepSeek-V3 {_pct(_w(n72, 1), _w(n8, 1))} ({_w(n8, 1):,.1f} -> "
        f"{_w(n72, 1):,.1f} tokens/s/GPU), Llama 3.1 405B {_pct(_w(n72, 0), _w(n8, 0))} "
        f"({_w(n8, 0):,.1f} -> {_w(n72, 0):,.1f}), for "
        f"${n72['network_capex_usd_per_gpu']:,.0f} of network per GPU against "
        f"${n8['network_capex_usd_per_gpu']:,.0f}; $ per million tokens "
        f"{_pct(n72['usd_per_m_tokens'], n8['usd_per_m_tokens'])}. The MoE plan takes EP"
        f"{lay(n8, 1)['ep']} in 8-GPU domains (EP all-to-all {_share(n8, 1, 'ep_comm') * 100:.1f} "
        f"% of the step) and EP{lay(n72, 1)['ep']} in NVL72 (EP {_share(n72, 1, 'ep_comm') * 100:.1f} "
        f"%, pipeline sends {_share(n72, 1, 'pp_comm') * 100:.1f} %); the dense plan's CP share "
        f"goes {_share(n8, 0, 'cp_comm') * 100:.1f} -> {_share(n72, 0, 'cp_comm') * 100:.1f} % and "
        f"its exposed DP share {_share(n8, 0, 'dp_comm') * 100:.1f} -> "
        f"{_share(n72, 0, 'dp_comm') * 100:.1f} %."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", metavar="JSON", required=True)
    ap.add_argument("--only", nargs="*", help="case names to run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--note", default="", help="the run's conditions, kept in the record")
    args = ap.parse_args()
    cases = run(args.only, args.workers)
    record = {
        "command": "python bench/design_answers.py " + shlex.join(sys.argv[1:]),
        "revision": _revision(),
        "cpus": os.cpu_count(),
        "note": args.note,
        "cases": cases,
    }
    Path(args.record).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
