"""Measured kernel tables as the compute model's data (issue 32; docs/calibration.md#kernel-tables).

A cluster may carry per-shape kernel times measured on its GPU (Cluster.kernels, the formats of
../shared/data/kernels/README.md). A look-up answers a time and how it got it:

- measured: the shape is a row of the table (the mean of its rows if it was measured twice);
- interpolated: the shape lies inside the box the table's shapes span on every dimension that
  matters (log m, n, k for a GEMM); the answer is the inverse-square-distance weighted mean of
  log(seconds per FLOP) over its nearest measured neighbours in log-shape space, so a shape
  between two measured ones runs at a throughput between theirs;
- extrapolated: outside that box the table says nothing, and the caller prices the kernel with
  the generation's efficiency curve (cost_models.compute), as without a table.

Sustained clocks: a table measured in short bursts (a few ms per shape) runs the largest GEMMs at
clocks the GPU cannot hold under its power cap when it does nothing but GEMMs: 8192^3 bf16 GEMMs
back to back hold 681-688 TFLOP/s on an H100 at its 700 W cap (KernelTables.sustained_bf16_tflops,
../shared/data/kernels/README.md sustained.csv; SM clock 1,260-1,395 MHz) where they burst at
740-761. Whole training steps do not throttle so: on the same GPU model, steps of 1B-8B-dims
models held 1,905-1,950 MHz at 610-670 W for 40 s each and their GEMMs ran at the tables' burst
speed (bench/results/h100-2026-11-26/single-gpu-steps: sustained_steps.csv, profile_*.json; the
optimizer, FSDP copies, norms and other memory-bound phases draw less power). So the sustained
rates are carried and reported, and a look-up is capped at them (seconds = max(table seconds,
FLOPs / sustained)) only where the tables say so (KernelTables.apply_sustained_cap: a workload
that keeps the GPU at its power cap); a shape slower than the cap keeps its measured time.

Seconds per FLOP (per byte for memory-bound ops) is what is interpolated: it varies slowly with
shape, where time itself grows with every dimension. Pure numpy, no I/O; the book caches every
answer per shape, and the Pricer builds one book per cluster (cost_models.pricer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .specs import KernelTables

MEASURED, INTERPOLATED, EXTRAPOLATED = "measured", "interpolated", "extrapolated"
STATUSES = (MEASURED, INTERPOLATED, EXTRAPOLATED)
COMPUTE_TABLES = ("gemm", "attention", "grouped_gemm", "memory_bound")
"""The KernelTables kinds a compute term is looked up in (collectives are the network's)."""
NEIGHBOURS = 4
"""Measured shapes an interpolation averages over (the nearest in log-shape space)."""
EXACT = 1e-9
"""Log-space distance below which a shape is the measured one (float noise of int shapes)."""
ATTENTION_FLOPS_FWD_BWD = 3.5
"""Backward = 2.5x forward FLOPs (FlashAttention-2 recomputes the scores), as the model counts."""

Lookup = tuple[float | None, str]


@dataclass(frozen=True)
class _Grid:
    """One kernel family's rows: log shape features, log seconds per unit of work."""

    features: np.ndarray  # (rows, dims)
    values: np.ndarray  # (rows, outputs)

    def lookup(self, query: tuple[float, ...]) -> tuple[np.ndarray | None, str]:
        q = np.log(np.asarray(query, dtype=float))
        dist = np.sqrt(((self.features - q) ** 2).sum(axis=1))
        hits = dist < EXACT
        if hits.any():
            return self.values[hits].mean(axis=0), MEASURED
        lo, hi = self.features.min(axis=0), self.features.max(axis=0)
        if ((q < lo - EXACT) | (q > hi + EXACT)).any():
            return None, EXTRAPOLATED
        near = np.argsort(dist, kind="stable")[:NEIGHBOURS]
        weights = 1.0 / dist[near] ** 2
        return (weights[:, None] * self.values[near]).sum(axis=0) / weights.sum(), INTERPOLATED


def _grid(features: list[tuple[float, ...]], values: list[tuple[float, ...]]) -> _Grid:
    return _Grid(np.log(np.asarray(features, dtype=float)), np.log(np.asarray(values, dtype=float)))


def _group(rows: list[tuple], key, feats, vals) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(key(r), ([], []))
        out[key(r)][0].append(feats(r))
        out[key(r)][1].append(vals(r))
    return {k: _grid(f, v) for k, (f, v) in out.items()}


def attended_keys(seq: float, window: float = 0, causal: bool = True) -> float:
    """Mean keys per query of one attention call over `seq` tokens.

    Full: seq. Causal: query i sees keys [0, i], seq / 2 on average (half the score matrix,
    the PaLM App. B convention). Causal sliding window of W tokens (query i sees keys
    (i - W, i], Mistral 7B sec. 2, Jiang et al. 2023, arXiv 2310.06825; HF `sliding_window`,
    FlexAttention mask `q - kv < W`): min(i, W) keys, whose mean over the sequence is
    (1 / seq) * integral_0^seq min(x, W) dx = W - W^2 / (2 seq) for W < seq, and seq / 2 (plain
    causal) for W >= seq. The continuous form keeps the causal convention's seq / 2 at W = seq;
    the discrete count, sum_i min(i + 1, W) = seq W - W (W - 1) / 2, differs by W / 2 keys in
    the whole sequence.
    """
    if not causal:
        return seq
    if window and window < seq:
        return window - window * window / (2.0 * seq)
    return seq / 2.0


WINDOW_TILE = 128
"""Query and key rows per block of a flash-style attention kernel: FlexAttention's block mask
(torch.nn.attention.flex_attention, _DEFAULT_SPARSE_BLOCK_SIZE = 128, the kernel the shipped H100
window rows time), and the 128-row query blocks of FlashAttention-2's forward (Dao 2023, arXiv
2307.08691, sec. 3.3 block sizes {64, 128} x {64, 128}). A block the window's mask cuts is computed
whole and masked."""

WINDOW_QUERY_TILE_OVERHEAD = {"forward": 1.8, "backward": 3.2}
"""Work per query tile that does not shrink with the window, in key-tile iterations: loading Q, the
softmax's final rescale and writing O (forward); loading Q, dO and the row statistics, writing dQ
(backward). The medians over the 11 window rows of the shipped H100 table (FlexAttention, 4K-32K
tokens, windows 128-4,096; `python bench/window_tile_overhead.py` solves it per row and prints the
ratios it gives beside the measured ones). A property of the kernel's structure, used where no
table row spans a window (window_tile_ratio)."""


def window_tile_counts(seq: int, window: int, tile: int = WINDOW_TILE) -> tuple[int, int, int]:
    """(key tiles computed with a causal `window`-token sliding window, with plain causal
    attention, query tiles) over a `seq`-token call: query tile i (rows [i t, (i + 1) t)) sees
    keys (q - window, q], so key tiles floor(max(0, i t - window + 1) / t) .. i; causal: 0 .. i."""
    n = -(-seq // tile)
    windowed = causal = 0
    for i in range(n):
        causal += i + 1
        windowed += i - max(0, i * tile - window + 1) // tile + 1
    return windowed, causal, n


def window_tile_ratio(seq: int, window: int, direction: str = "forward") -> float:
    """Windowed / full causal time of one attention call where no measured window row spans it:
    whole tiles (window_tile_counts) plus WINDOW_QUERY_TILE_OVERHEAD key tiles per query tile.
    At 4K tokens and a 128 window it gives 0.21 forward where the plain FLOP ratio (attended_keys)
    gives 0.06 and FlexAttention measures 0.23 on H100; 1.0 where the window spans the call."""
    if not window or window >= seq:
        return 1.0
    windowed, causal, n = window_tile_counts(seq, window)
    x = WINDOW_QUERY_TILE_OVERHEAD[direction]
    return (windowed + n * x) / (causal + n * x)


RING_QUERY_TILE_OVERHEAD = {
    (True, "forward"): 1.3,
    (True, "backward"): 5.2,
    (False, "forward"): 0.4,
    (False, "backward"): 2.1,
}
"""Work per query tile that does not grow with the keys, in key-tile iterations, of the cuDNN /
FlashAttention-2 calls a CP ring runs where the tables do not time them (tile_rate_ratio),
keyed by (causal, direction). Causal: the values that best carry the shipped Hopper tables'
causal rows (cuDNN fused and FA2, 2K-32K tokens, H100 and H200) from each longer call's rate to
every shorter one's; besides loading Q and writing O they hold the causal grid's tail (query
tiles of unequal work). Non-causal: the fit to the FlashAttention-3 paper's H100 non-causal
figures at head dim 128, 512-16K tokens (Shah et al. 2024, arXiv 2407.08608, Fig. 5 / 6: FA2
forward 309-370, backward 214-322 TFLOP/s; cuDNN 497-617, 305-518), whose grid is uniform.
`python bench/ring_step_tiles.py` fits both and prints the errors."""


def attention_tile_work(queries: float, keys: float, causal: bool, overhead: float) -> float:
    """Tile iterations per (128 x 128) block of query-key pairs the call attends: whole key tiles
    (a causal call computes its diagonal tiles whole: n (n + 1) / 2 of them over n^2 / 2 blocks of
    pairs; a non-causal one nq x nk) plus `overhead` key tiles per query tile."""
    t = WINDOW_TILE
    nq, nk = -(-queries // t), -(-keys // t)
    if causal:  # a causal call is square
        tiles, blocks = nq * (nq + 1) / 2, queries * queries / (2.0 * t * t)
    else:
        tiles, blocks = nq * nk, queries * keys / (t * t)
    return (tiles + nq * overhead) / blocks


def tile_rate_ratio(
    to: tuple[float, float, bool], from_: tuple[float, float, bool], direction: str
) -> float:
    """Seconds per FLOP of the (queries, keys, causal) call `to` over the call `from_`'s, one
    direction, under the tile model (attention_tile_work with RING_QUERY_TILE_OVERHEAD): how
    compute.cp_step_rate carries a measured call's rate to a CP ring step's call the table does
    not time. The same seconds per tile iteration in both calls: the FA3 paper's 16K figures put
    causal forward 7-8 % slower per FLOP than non-causal beyond the tile count, which is not
    priced (non-causal steps carried from a causal call err slow by that much)."""
    work = [
        attention_tile_work(*c, RING_QUERY_TILE_OVERHEAD[(c[2], direction)]) for c in (to, from_)
    ]
    return work[0] / work[1]


def attention_fwd_flops(
    batch: float,
    seq: float,
    heads: float,
    d_qk: float,
    d_v: float,
    causal: bool,
    window: float = 0,
) -> float:
    """Forward FLOPs of one attention call: QK^T (2 d_qk) and PV (2 d_v) per query-key pair,
    over attended_keys pairs per query (the convention of cost_models.compute.
    attention_core_flops); `window` > 0: a causal sliding window of that many tokens."""
    return 2.0 * batch * seq * attended_keys(seq, window, causal) * heads * (d_qk + d_v)


def attention_row_rate(r: tuple) -> tuple[float, float]:
    """(forward + backward, forward) seconds per forward FLOP (attention_fwd_flops) of one
    attention row (models_zoo.kernel_tables.attention_rows): what the book interpolates."""
    b, s, h, _kv, dqk, dv, causal, window, _kern, time_ms, fwd_ms = r
    flops = attention_fwd_flops(b, s, h, dqk, dv, causal, window)
    total = time_ms * 1e-3 / flops
    # A row without its forward alone splits like the model: forward 1 / 3.5 of the call.
    fwd = fwd_ms * 1e-3 / flops if fwd_ms > 0 else total / ATTENTION_FLOPS_FWD_BWD
    return total, fwd


def _attention_features(b: float, s: float, h: float, kv: float, dqk: float, dv: float):
    """What attention speed depends on: sequence, parallel work (batch x heads), the GQA group
    and the head dims."""
    return (s, b * h, h / kv, dqk, dv)


@dataclass(frozen=True)
class _NoRows:
    """The rows of a book without tables (KernelTables refuses to hold none)."""

    gemm: tuple = ()
    grouped_gemm: tuple = ()
    attention: tuple = ()
    memory_bound: tuple = ()
    sustained_bf16_tflops: None = None
    sustained_fp8_tflops: None = None
    apply_sustained_cap: bool = False


_NO_ROWS = _NoRows()


@dataclass
class KernelBook:
    """Look-ups into one cluster's kernel tables, cached per shape (module docstring). Every
    look-up goes through `_cached` with its full shape as the key; without tables (None) every
    look-up is extrapolated (kernel_shapes.ShapeRecorder records the keys)."""

    tables: KernelTables | None
    _gemm: dict = field(init=False)
    _grouped: dict = field(init=False)
    _attention: dict = field(init=False)
    _memory: dict = field(init=False)
    _window: dict = field(init=False)
    _streaming: dict = field(init=False)
    _min_s_per_flop: dict = field(init=False)
    _cache: dict = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        t = _NO_ROWS if self.tables is None else self.tables
        caps = {"bf16": t.sustained_bf16_tflops, "fp8": t.sustained_fp8_tflops}
        if not t.apply_sustained_cap:  # the rates are reported, not applied (module docstring)
            caps = {}
        self._min_s_per_flop = {k: 0.0 if c is None else 1.0 / (c * 1e12) for k, c in caps.items()}
        self._gemm = _group(
            list(t.gemm),
            lambda r: (r[3], r[4]),
            lambda r: r[:3],
            lambda r: (r[5] * 1e-3 / (2.0 * r[0] * r[1] * r[2]),),
        )
        self._grouped = _group(
            list(t.grouped_gemm),
            lambda r: r[4],
            lambda r: r[:4],
            lambda r: (r[5] * 1e-3 / (2.0 * r[0] * r[1] * r[2] * r[3]),),
        )
        self._attention = _group(
            list(t.attention),
            lambda r: (r[8], r[6], r[7]),
            lambda r: _attention_features(*r[:6]),
            attention_row_rate,
        )
        self._memory = _group(
            list(t.memory_bound),
            lambda r: r[0],
            lambda r: (r[1],),
            lambda r: (r[2] * 1e-3 / r[1],),
        )
        self._window = _window_grids(t.attention)
        streaming: dict[str, list[float]] = {}
        for op, nbytes, time_ms in t.memory_bound:
            if nbytes >= HBM_STREAMING_BYTES:
                streaming.setdefault(op, []).append(nbytes / (time_ms * 1e-3))
        self._streaming = {op: float(np.median(r)) for op, r in streaming.items()}

    @property
    def source(self) -> str:
        return "no kernel tables" if self.tables is None else self.tables.source

    def _cached(self, key: tuple, grid: _Grid | None, query: tuple) -> tuple[tuple | None, str]:
        found = self._cache.get(key)
        if found is None:
            if grid is None:
                found = (None, EXTRAPOLATED)
            else:
                vals, status = grid.lookup(query)
                found = (None if vals is None else tuple(np.exp(vals).tolist()), status)
            self._cache[key] = found
        return found

    def gemm_s(self, m: float, n: float, k: float, dtype: str, layout: str) -> Lookup:
        """Seconds of one GEMM C[m,n] = A[m,k] B[k,n] in `layout` (TN forward, NN data grad, NT
        weight grad). fp8 rows measured only as TN (Hopper's fp8 GEMMs run TN alone; Transformer
        Engine transposes the fp8 copies) stand for every layout."""
        if (dtype, layout) not in self._gemm and dtype == "fp8":
            layout = "TN"
        key = ("gemm", m, n, k, dtype, layout)
        per_flop, status = self._cached(key, self._gemm.get((dtype, layout)), (m, n, k))
        return self._sustained(per_flop, dtype, 2.0 * m * n * k), status

    def _sustained(self, per_flop: tuple | None, dtype: str, flops: float) -> float | None:
        """Seconds of `flops` at the looked-up seconds per FLOP, no faster than the sustained
        rate under the power cap where the tables apply it (module docstring)."""
        if per_flop is None:
            return None
        return max(per_flop[0], self._min_s_per_flop.get(dtype, 0.0)) * flops

    def grouped_gemm_s(self, experts: float, rows: float, n: float, k: float, dtype: str) -> Lookup:
        """Seconds of one grouped GEMM: `experts` GEMMs of [rows, k] x [k, n]."""
        key = ("grouped", experts, rows, n, k, dtype)
        per_flop, status = self._cached(key, self._grouped.get(dtype), (experts, rows, n, k))
        return self._sustained(per_flop, dtype, 2.0 * experts * rows * n * k), status

    def attention_s_per_flop(
        self,
        batch: float,
        seq: float,
        heads: float,
        kv_heads: float,
        d_qk: float,
        d_v: float,
        *,
        causal: bool,
        window: int,
        kernel: str,
    ) -> tuple[tuple[float, float] | None, str]:
        """(forward + backward, forward) seconds per forward FLOP (attention_fwd_flops) of one
        attention call of this shape."""
        key = ("attention", batch, seq, heads, kv_heads, d_qk, d_v, causal, window, kernel)
        grid = self._attention.get((kernel, causal, window))
        query = _attention_features(batch, seq, heads, kv_heads, d_qk, d_v)
        found, status = self._cached(key, grid, query)
        return (None if found is None else (found[0], found[1])), status

    def window_ratio(
        self,
        batch: float,
        seq: float,
        heads: float,
        kv_heads: float,
        d_qk: float,
        d_v: float,
        *,
        window: int,
        kernel: str,
        causal: bool = True,
    ) -> tuple[tuple[float, float] | None, str, str | None]:
        """(forward, backward) time of a sliding-window attention call of this shape over the
        same call with full (causal) attention, looked up at (`seq`, `window`) (the ratio's
        dims; the rest of the shape is what `planner measure` records to measure): the
        measured saving (_window_grids), the status of its look-up, and the kernel whose rows
        gave it. The workload's own kernel's window rows when the table has them, else another
        kernel's (the shared H100 table measures windows with FlexAttention only); (None,
        extrapolated, None) when no kernel's rows span this (seq, window)."""
        kernels = sorted(k for k, c in self._window if c == causal)
        status = EXTRAPOLATED
        for kern in [kernel, *(k for k in kernels if k != kernel)]:
            key = ("window", batch, seq, heads, kv_heads, d_qk, d_v, causal, window, kern)
            grid = self._window.get((kern, causal))
            found, status = self._cached(key, grid, (seq, window))
            if found is not None:
                return (found[0], found[1]), status, kern
        return None, status, None

    def memory_bound_s(self, op: str, nbytes: float) -> Lookup:
        """Seconds a memory-bound op takes to move `nbytes` (its measured bandwidth at that size).

        Outside the sizes measured for `op` the nearest measured size's bandwidth holds
        (`extrapolated`): a streaming kernel's bandwidth does not rise at smaller sizes (launch
        and tail effects only lower it) and is flat above ~100 MB (the shared H100 rows: RMSNorm
        1,829-2,068 GB/s over 134 MB - 1.1 GB), so holding it is the measured figure nearest to
        the truth. Above the largest size it holds only when that size streams from HBM
        (HBM_STREAMING_BYTES): a smaller row (a toy sweep's, or one served from L2) says nothing
        about a larger call, which then gets (None, extrapolated) and the generation's HBM
        figure, as when the table has no row of `op`."""
        grid = self._memory.get(op)
        per_byte, status = self._cached(("memory", op, nbytes), grid, (nbytes,))
        if per_byte is None and grid is not None:
            lo, hi = np.exp(grid.features.min()), np.exp(grid.features.max())
            if nbytes > hi and hi < HBM_STREAMING_BYTES:
                return None, status
            held = float(min(max(nbytes, lo), hi))
            per_byte, _ = self._cached(("memory", op, held), grid, (held,))
        return (None if per_byte is None else per_byte[0] * nbytes), status

    def streaming_bytes_per_s(self, op: str) -> float | None:
        """The bytes/s `op` streams at: the median rate of its rows that stream from HBM (at
        least HBM_STREAMING_BYTES), or None where the table has none. One rate per op, not a
        look-up per size: the per-step ops priced so (the optimizer step, the gradient clip,
        FSDP2's reduce-scatter copy-in: stage.stage_optimizer_s, stage.fsdp_copies_s) move a
        stage's whole parameter set, hundreds of MB and more, where the measured rates are flat
        (the profiled H100 / H200 rows: each op within 4 % of its median over 9-101 GB per
        step), and a rate keeps those terms affine in the stage's parameters, as the stage
        partition needs (planner/search/partition.py)."""
        return self._streaming.get(op)


HBM_STREAMING_BYTES = 2**27
"""128 MiB: twice the largest Hopper L2 (50 MB on H100, 60 MB on H200; NVIDIA H100 whitepaper,
torch.cuda.get_device_properties on the H200): a memory-bound op moving more than this streams
from HBM, so its measured bandwidth stands for larger calls too (the shared tables' smallest row
is exactly this size)."""


def _window_grids(rows) -> dict:
    """(kernel, causal) -> grid over (seq, window) of log(windowed / full time) of the
    forward and of the backward: each windowed row over the full-attention row of the same kernel and
    shape (batch, seq, heads, KV heads, head dims). A ratio of one kernel's own times carries
    the saving the window brings (tiles skipped) without that kernel's absolute speed, so it
    applies to another kernel's full-attention time; it depends on seq and window, the shape
    being the same in numerator and denominator."""
    full = {(r[8], r[6], *r[:6]): r for r in rows if not r[7]}
    pairs: dict = {}
    for r in rows:
        base = full.get((r[8], r[6], *r[:6])) if r[7] else None
        if base is None or r[7] >= r[1]:  # no full row to compare, or the window spans it all
            continue
        fwd = bwd = r[9] / base[9]  # without forward times: one ratio for both passes
        if 0 < r[10] < r[9] and 0 < base[10] < base[9]:
            fwd, bwd = r[10] / base[10], (r[9] - r[10]) / (base[9] - base[10])
        feats, vals = pairs.setdefault((r[8], r[6]), ([], []))
        feats.append((r[1], r[7]))
        vals.append((fwd, bwd))
    return {k: _grid(f, v) for k, (f, v) in pairs.items()}


def worst(statuses) -> str:
    """The least measured of some look-ups' statuses (how a term built from them was priced)."""
    return max(statuses, key=STATUSES.index, default=MEASURED)


def _leave_one_out(grid: _Grid) -> list[float]:
    """interpolated / measured - 1 of each row the others' box still covers, priced by the
    other rows alone: how well the table predicts a shape it lacks (signed)."""
    out = []
    n = len(grid.features)
    for i in range(n):
        keep = np.arange(n) != i
        if keep.sum() < 2:
            continue
        vals, _status = _Grid(grid.features[keep], grid.values[keep]).lookup(
            tuple(np.exp(grid.features[i]).tolist())
        )
        if vals is not None:
            out.append(float(np.exp(vals[0] - grid.values[i][0])) - 1.0)
    return out


def leave_one_out_errors(tables: KernelTables) -> dict[str, dict[tuple, list[float]]]:
    """Per table kind and per group of rows looked up together (GEMM: (dtype, layout);
    grouped GEMM: dtype; attention: (kernel, causal, window); memory-bound: op): each covered
    row's signed leave-one-out error (_leave_one_out)."""
    book = KernelBook(tables)
    grids = {
        "gemm": book._gemm,
        "grouped_gemm": book._grouped,
        "attention": book._attention,
        "memory_bound": book._memory,
    }
    return {
        kind: {key: _leave_one_out(g) for key, g in grid.items()} for kind, grid in grids.items()
    }


def _reproduce(book: KernelBook, kind: str, row: tuple) -> float:
    """Seconds the book answers for a table row's own shape."""
    if kind == "gemm":
        return book.gemm_s(*row[:5])[0] or 0.0
    if kind == "grouped_gemm":
        return book.grouped_gemm_s(*row[:5])[0] or 0.0
    if kind == "memory_bound":
        return book.memory_bound_s(row[0], row[1])[0] or 0.0
    b, s, h, kv, dqk, dv, causal, window, kernel = row[:9]
    found, _ = book.attention_s_per_flop(
        b, s, h, kv, dqk, dv, causal=causal, window=window, kernel=kernel
    )
    flops = attention_fwd_flops(b, s, h, dqk, dv, causal, window)
    return 0.0 if found is None else found[0] * flops


def table_residuals(tables: KernelTables) -> dict[str, dict[str, float]]:
    """Per table kind: how closely the look-up reproduces each measured row (max / median
    |looked up / measured - 1| in %), and the same with each row left out (leave-one-out over
    the rows whose shape the others still span; `loo_rows` of them). The rows as measured: the
    sustained-clock cap is a separate step (module docstring)."""
    burst = {"sustained_bf16_tflops": None, "sustained_fp8_tflops": None}
    book = KernelBook(tables.model_copy(update=burst))
    time_col = {"gemm": 5, "grouped_gemm": 5, "attention": 9, "memory_bound": 2}
    out = {}
    for kind, groups in leave_one_out_errors(tables).items():
        rows = getattr(tables, kind)
        if not rows:
            continue
        res = [abs(_reproduce(book, kind, r) / (r[time_col[kind]] * 1e-3) - 1.0) for r in rows]
        loo = [abs(x) for errs in groups.values() for x in errs]
        out[kind] = {
            "rows": len(rows),
            "max_residual_pct": 100 * max(res),
            "median_residual_pct": 100 * float(np.median(res)),
            "loo_rows": len(loo),
            "loo_max_pct": 100 * max(loo, default=0.0),
            "loo_median_pct": 100 * float(np.median(loo)) if loo else 0.0,
        }
    return out
