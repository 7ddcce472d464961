"""Measured collective curves (nccl-tests) as the network model's data (issue 32).

A cluster's kernel tables may carry nccl-tests runs of its own tiers (KernelTables.collectives:
per collective, group of `ranks` GPUs on `nodes` nodes, message size -> bus bandwidth). Every
collective term the Pricer composes (TP all-reduce, CP all-gather and ring hops, EP all-to-all,
DP / FSDP reduce-scatter, all-gather and all-reduce, PP send/recv) then takes its time from them:

- measured: the group is a measured one and the size a measured size;
- interpolated: between two measured sizes of that group, log(busbw) linear in log(size) (the
  issue's rule; time = size / algbw, algbw = busbw / the nccl-tests factor, doc/PERFORMANCE.md),
  or between two measured group sizes of the same kind (same tiers crossed, same members per
  inner domain) the ratio measured / modelled, linear in log(group size);
- extrapolated: outside the measured sizes or group sizes the algorithm model of cost_models.comm
  holds, as without a table.

The table replaces the model's figure for the cluster it was measured on: a term's time is the
model's time times `factor` = table time / model time on the cluster's own tiers, for the same
(collective, group, size). So a measured point is priced at its measured time, the split across
tiers and the effect of uplinks shared by a placement (cost_models.uplink: the tiers a term is
priced on differ from the cluster's) keep the model's shape, and a term with no table row is
the model's unchanged. A group's span (members within each tier's domain, cost_models.rankmap)
is what it is looked up by: a run over `ranks` GPUs on `nodes` nodes spans contiguous nodes
(group_span). A point-to-point send (PP, CP ring hops) is the sendrecv curve of two ranks across
the same tier (pair_span). DeepEP's exchange is not an NCCL collective: the model prices it.

Pure numpy; answers are cached per (collective, span, size), so the search pays one look-up per
distinct term.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Sequence

import numpy as np

from .comm import all_to_all_time_s, p2p_time_s
from .comm import collective_tier_s as _model_tier_s
from .comm import collective_time_s as _model_time_s
from .kernels import EXTRAPOLATED, INTERPOLATED, MEASURED
from .specs import Cluster, LinkTier

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv")
AUTO = "auto"
"""Algorithm column of a run that let NCCL choose (no NCCL_ALGO)."""
EXACT = 1e-9


def busbw_factor(op: str, ranks: int) -> float:
    """busbw / algbw as nccl-tests computes it (doc/PERFORMANCE.md; each test's GetBw)."""
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    return 1.0


def group_span(ranks: int, nodes: int, cluster: Cluster) -> tuple[int, ...]:
    """Members within one domain of each tier of a run over `ranks` GPUs, ranks / nodes per
    node, on contiguous nodes (what mpirun -npernode / srun give)."""
    per_node, gpn = ranks // nodes, cluster.gpus_per_node
    out = []
    for tier in cluster.tiers:
        d = tier.domain_size
        if d is None:
            out.append(ranks)
        elif d >= gpn:
            out.append(min(ranks, per_node * (d // gpn)))
        else:  # a domain inside a node
            out.append(min(ranks, per_node, d))
    return tuple(out)


def outer_index(span: Sequence[int]) -> int:
    """Index of the outermost tier a group crosses (where it reaches all its members)."""
    for j, n in enumerate(span):
        if n >= span[-1]:
            return j
    return len(span) - 1


def pair_span(span: Sequence[int]) -> tuple[int, ...]:
    """The span of two ranks across the outermost tier `span` crosses (one PP or CP hop)."""
    j = outer_index(span)
    return tuple(1 if i < j else 2 for i in range(len(span)))


def model_time_s(op: str, size: float, span: Sequence[int], tiers: tuple[LinkTier, ...]) -> float:
    """The algorithm model's seconds of one collective of `size` bytes (nccl-tests' S)."""
    if span[-1] <= 1:
        return 0.0
    if op == "all_to_all":
        return all_to_all_time_s(size, list(span), tiers)
    if op == "sendrecv":
        return p2p_time_s(size, tiers[outer_index(span)])
    return _model_time_s(op, size, list(span), tiers)


class CollectiveBook:
    """Look-ups into one cluster's collective curves, cached (module docstring). `seen`, on a
    traced copy (`traced`), lists (term, status) of every look-up, for estimate's report."""

    def __init__(self, cluster: Cluster) -> None:
        assert cluster.kernels is not None
        self.source = cluster.kernels.source
        self.tiers = cluster.tiers
        rows: dict[tuple, dict[float, list[float]]] = {}
        for op, ranks, nodes, size, busbw, algo in cluster.kernels.collectives:
            key = (op, algo.lower(), group_span(ranks, nodes, cluster))
            rows.setdefault(key, {}).setdefault(float(size), []).append(math.log(busbw))
        # (op, algorithm, span) -> (log sizes ascending, log busbw): repeats averaged in log
        self._curves = {
            k: (np.log(sorted(v)), np.array([sum(v[s]) / len(v[s]) for s in sorted(v)]))
            for k, v in rows.items()
        }
        self._cache: dict[tuple, tuple[float, str]] = {}
        self._groups: dict[tuple, tuple] = {}  # (op, span) -> (algorithm, curve, lo, hi)
        self.seen: list[tuple[str, str]] | None = None

    def traced(self) -> CollectiveBook:
        """A copy sharing the cache that records each look-up's (term, status) in `seen`."""
        out = copy.copy(self)
        out.seen = []
        return out

    def factor(self, op: str, span: Sequence[int], size: float, term: str = "") -> float:
        """Table time / model time of `op` over a group of `span` moving `size` bytes (1 where
        the table says nothing)."""
        key = (op, tuple(span), size)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._lookup(op, key[1], size)
        if self.seen is not None and term:
            self.seen.append((term, found[1]))
        return found[0]

    def hop_factor(self, span: Sequence[int], size: float, term: str = "") -> float:
        """factor of one send to the next rank of a group of `span`: the sendrecv curve of two
        ranks across the outermost tier it crosses (pair_span)."""
        key = ("hop", tuple(span), size)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._lookup("sendrecv", pair_span(span), size)
        if self.seen is not None and term:
            self.seen.append((term, found[1]))
        return found[0]

    def untabled(self, term: str) -> None:
        """Record a term priced on the model by design (DeepEP: not an NCCL collective)."""
        if self.seen is not None:
            self.seen.append((term, EXTRAPOLATED))

    def _algorithm(self, op: str, j: int) -> str:
        """The rows to read: NCCL's own choice, unless tier j allows one algorithm only and it
        was measured; a table of one forced algorithm stands for NCCL's choice."""
        algos = sorted({k[1] for k in self._curves if k[0] == op})
        allowed = self.tiers[j].algorithms
        if allowed is not None and len(allowed) == 1 and allowed[0] in algos:
            return allowed[0]
        return AUTO if AUTO in algos or len(algos) != 1 else algos[0]

    def _group(self, op: str, span: tuple[int, ...]) -> tuple:
        """(algorithm, the group's own curve or None, the measured groups around it), once per
        (collective, span): every size of the group reads the same."""
        found = self._groups.get((op, span))
        if found is None:
            algo = self._algorithm(op, outer_index(span))
            curve = self._curves.get((op, algo, span))
            lo, hi = (None, None) if curve is not None else self._neighbours(op, algo, span)
            found = self._groups[(op, span)] = (algo, curve, lo, hi)
        return found

    def _lookup(self, op: str, span: tuple[int, ...], size: float) -> tuple[float, str]:
        if span[-1] <= 1 or size <= 0:
            return 1.0, MEASURED
        algo, curve, lo, hi = self._group(op, span)
        if curve is not None:
            return self._on_curve(op, span, size, curve)
        if lo is None or hi is None:
            return 1.0, EXTRAPOLATED
        f_lo, s_lo = self._on_curve(op, lo, size, self._curves[(op, algo, lo)])
        f_hi, s_hi = self._on_curve(op, hi, size, self._curves[(op, algo, hi)])
        if EXTRAPOLATED in (s_lo, s_hi):
            return 1.0, EXTRAPOLATED
        w = math.log(span[-1] / lo[-1]) / math.log(hi[-1] / lo[-1])
        return math.exp((1 - w) * math.log(f_lo) + w * math.log(f_hi)), INTERPOLATED

    def _on_curve(
        self, op: str, span: tuple[int, ...], size: float, curve: tuple[np.ndarray, np.ndarray]
    ) -> tuple[float, str]:
        """(factor, status) at `size` on one measured group's curve."""
        sizes, busbw = curve
        q = math.log(size)
        if q < sizes[0] - EXACT or q > sizes[-1] + EXACT:
            return 1.0, EXTRAPOLATED
        hit = np.abs(sizes - q) < EXACT
        status = MEASURED if hit.any() else INTERPOLATED
        log_bw = float(busbw[hit][0]) if hit.any() else float(np.interp(q, sizes, busbw))
        algbw = math.exp(log_bw) * 1e9 / busbw_factor(op, span[-1])
        model = model_time_s(op, size, span, self.tiers)
        if model <= 0:
            return 1.0, EXTRAPOLATED
        return size / algbw / model, status

    def _neighbours(
        self, op: str, algo: str, span: tuple[int, ...]
    ) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        """The measured groups of the same kind (same outermost tier, same members inside the
        tiers below it) just smaller and just larger than `span`."""
        j, n = outer_index(span), span[-1]
        lo = hi = None
        for o, a, s in self._curves:
            if o != op or a != algo or len(s) != len(span) or outer_index(s) != j:
                continue
            if s[:j] != span[:j]:
                continue
            if s[-1] < n and (lo is None or s[-1] > lo[-1]):
                lo = s
            if s[-1] > n and (hi is None or s[-1] < hi[-1]):
                hi = s
        return lo, hi


# ---------------------------------------------------------------- the model's calls, tabled


@functools.lru_cache(maxsize=1 << 16)
def _model_tier_cached(
    kind: str, payload_bytes: float, span: tuple[int, ...], tiers: tuple[LinkTier, ...], buckets: int
) -> tuple[float, ...]:
    """comm.collective_tier_s (a pure function of its arguments) remembered: the stage partition
    prices the same stage's DP collectives on every pipeline rank that may hold the same layers
    (planner/search/partition.py tabulates each rank's counts), 10^5 calls a search whose
    arguments mostly repeat. The tiers are frozen specs, hashed by value."""
    return tuple(_model_tier_s(kind, payload_bytes, list(span), tiers, buckets))


def collective_tier_s(
    kind: str,
    payload_bytes: float,
    span: Sequence[int],
    tiers: tuple[LinkTier, ...],
    buckets: int = 1,
    book: CollectiveBook | None = None,
    term: str = "",
) -> list[float]:
    """comm.collective_tier_s, each tier's seconds times the table's factor for one bucket."""
    out = list(_model_tier_cached(kind, payload_bytes, tuple(span), tiers, buckets))
    if book is None or span[-1] <= 1:
        return out
    f = book.factor(kind, span, payload_bytes / buckets, term)
    return [x * f for x in out]


def collective_time_s(
    kind: str,
    payload_bytes: float,
    span: Sequence[int],
    tiers: tuple[LinkTier, ...],
    book: CollectiveBook | None = None,
    term: str = "",
) -> float:
    """comm.collective_time_s with the table's factor."""
    if book is None:
        return _model_time_s(kind, payload_bytes, list(span), tiers)
    return sum(collective_tier_s(kind, payload_bytes, span, tiers, 1, book, term))


def p2p_s(
    payload_bytes: float,
    cluster: Cluster,
    span: Sequence[int],
    book: CollectiveBook | None = None,
    term: str = "",
) -> float:
    """One send of payload_bytes to the next rank of a group of `span` (across the outermost
    tier it crosses), with the sendrecv curve's factor."""
    if span[-1] <= 1:
        return 0.0
    tier = cluster.tiers[outer_index(span)]
    out = p2p_time_s(payload_bytes, tier)
    if book is None or out <= 0:
        return out
    return out * book.hop_factor(span, payload_bytes, term)
