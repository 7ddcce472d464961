"""FSDP2 all-gathers per model chunk and step under torch.distributed.pipelining, replayed from
torch's own schedule (the framework test environment, torch 2.14): ScheduleInterleaved1F1B's
compute order per rank (_calculate_single_rank_operations), lowered with the runtime's own
_add_unshard_reshard (UNSHARD / RESHARD actions, max_active_stages 3), then walked with FSDP2's
state rules (_fsdp_param_group.py): UNSHARD, a forward or a backward gathers a sharded chunk;
a forward reshards it again under reshard_after_forward (torchtitan 'always' = ZeRO-3); a
backward leaves it unsharded (stage.py backward_maybe_with_nosync:
set_reshard_after_backward(False)); RESHARD shards it. Compared with
cost_models.accumulation.dp_rounds, which the planner prices with."""

from __future__ import annotations

import types

import pytest

schedules = pytest.importorskip(
    "torch.distributed.pipelining.schedules", reason="torch not installed (.ci/run's env has it)"
)

from cost_models.accumulation import dp_rounds  # noqa: E402
from cost_models.specs import Layout  # noqa: E402


def _rank_order(pp: int, vp: int, m: int, rank: int) -> list:
    sched = schedules.ScheduleInterleaved1F1B
    rounds = max(1, m // pp)
    fake = types.SimpleNamespace(
        pp_group_size=pp, n_local_stages=vp, rank=rank, _n_microbatches=m,
        number_of_rounds=rounds, microbatches_per_round=m // rounds,
    )
    return sched._calculate_single_rank_operations(fake, rank)


def _gathers(actions: list, reshard_after_forward: bool) -> dict[int, int]:
    sharded: dict[int, bool] = {}
    gathers: dict[int, int] = {}
    s = schedules
    for a in s._add_unshard_reshard(actions):
        stage, kind = a.stage_index, a.computation_type
        sharded.setdefault(stage, True)
        gathers.setdefault(stage, 0)
        if kind in (s.UNSHARD, s.FORWARD, s.FULL_BACKWARD):
            gathers[stage] += sharded[stage]
            sharded[stage] = kind == s.FORWARD and reshard_after_forward
        elif kind == s.RESHARD:
            sharded[stage] = True
    return gathers


@pytest.mark.parametrize("pp,vp,m", [(2, 1, 4), (4, 1, 8), (2, 2, 4), (4, 2, 16), (4, 3, 8)])
@pytest.mark.parametrize("zero", [2, 3])
def test_replayed_schedule_gathers_match_dp_rounds(pp, vp, m, zero):
    expected = dp_rounds(Layout(dp=2, pp=pp, vp=vp, zero_stage=zero), m, "every_micro_batch")[1]
    for rank in range(pp):
        got = _gathers(_rank_order(pp, vp, m, rank), reshard_after_forward=zero == 3)
        assert set(got.values()) == {expected}, (rank, got)


def test_more_chunks_than_kept_gathered_gather_again():
    """vp 4 > max_active_stages: some chunks are evicted and gathered again; the torchtitan
    profile refuses such a layout (framework._torchtitan_violations)."""
    got = _gathers(_rank_order(4, 4, 8, 0), reshard_after_forward=False)
    assert max(got.values()) > 1
