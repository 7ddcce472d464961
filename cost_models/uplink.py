"""Uplink sharing: groups that leave a switch at the same time share its uplinks.

A tier's `oversubscription` o is the taper of the switches below it: a switch with P downlink
ports of b GB/s each has P b / o of uplink. Priced per GPU as b / o (comm.
effective_bandwidth_bytes_per_s), it assumes every port sends upward at once, which is what a
regular block numbered by a rank order does (every domain of the rank grid is alike). On a real
allocation a switch can hold stages whose data-parallel groups stay under it next to stages whose
groups leave it: only the c GPUs that send upward share its P b / o, each at
min(b, P b / (o c)), i.e. at an effective oversubscription max(1, o c / P) (Hoefler, Schneider &
Lumsdaine, "Multistage switches are not crossbars", Cluster 2008: congestion on a fat-tree's
uplinks is the number of flows that share one; here all flows of the window are alike, so the
count of senders is the load).

Two windows, each with its own senders:

- gradient: the DP, DP x CP and expert-DP groups' reduce-scatter / all-gather behind the last
  micro-batch's backward (one window for all stages); with HSDP the dp_shard x CP groups'
  reduce-scatter / all-gather and the dp_replicate groups' all-reduce (stage._hsdp_tier_s), and
  with EP the experts' edp_shard and edp_replicate groups alike;
- pipeline: the steady state's PP sends and the TP, CP and EP exchanges inside the layers (every
  stage at once).

P counts the job's own GPUs under the switch (other jobs under it are taken to use their ports'
share of its uplink); c the job's GPUs under it with a group of one of the window's kinds that
has a member outside it. The busiest switch of a tier sets the share, as the worst group sets a
span (cost_models.rankmap).

The share c / P is rounded up to a multiple of 1 / UPLINK_STEPS (`uplink_step`), so the
placement model (planner/place/model.py) holds it as a small integer with one linear constraint
per switch (UPLINK_STEPS x c <= P x q) and tabulates the step time over q; the rounding is
upward, so the price never credits more uplink than the switch has.
"""

from __future__ import annotations

from collections.abc import Mapping

from .specs import Cluster, LinkTier

UPLINK_STEPS = 4
"""Resolution of the sending share: q / UPLINK_STEPS, q = 0..UPLINK_STEPS."""


def uplink_step(sending_gpus: int, port_gpus: int, max_step: int = UPLINK_STEPS) -> int:
    """ceil(UPLINK_STEPS x c / P) in integers (the share of a switch's ports sending upward),
    at most `max_step` (above UPLINK_STEPS where other jobs' traffic takes part of the uplink:
    P is then the ports' share left to the job, planner/place/traffic.py)."""
    if sending_gpus <= 0 or port_gpus <= 0:
        return 0
    return min(max_step, -(-UPLINK_STEPS * sending_gpus // port_gpus))


def effective_oversubscription(oversubscription: float, step: int) -> float:
    """max(1, o x q / UPLINK_STEPS): a sender never exceeds its own port's line rate."""
    return max(1.0, oversubscription * step / UPLINK_STEPS)


def shared_tiers(
    tiers: tuple[LinkTier, ...], steps: Mapping[int, int] | None
) -> tuple[LinkTier, ...]:
    """The tiers with the oversubscription of tier j replaced by its effective value at step
    steps[j] (tiers not named keep theirs: every port sending)."""
    if not steps:
        return tiers
    out = list(tiers)
    for j, q in steps.items():
        o = out[j].oversubscription
        if o > 1 or q > UPLINK_STEPS:  # a 1:1 tier tapers only past its full share
            out[j] = out[j].model_copy(
                update={"oversubscription": effective_oversubscription(o, q)}
            )
    return tuple(out)


def shared_cluster(cluster: Cluster, steps: Mapping[int, int] | None) -> Cluster:
    """The cluster the gradient window is priced on (itself when no steps are given)."""
    if not steps:
        return cluster
    return cluster.model_copy(update={"tiers": shared_tiers(cluster.tiers, steps)})


def tapered_tiers(cluster: Cluster) -> list[int]:
    """Tiers above the innermost with an oversubscription > 1 (their switches are the domains of
    the tier below)."""
    return [j for j in range(1, len(cluster.tiers)) if cluster.tiers[j].oversubscription > 1]
