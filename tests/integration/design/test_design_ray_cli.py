"""`planner design --backend ray --json` prints exactly what the local backend prints (CONTRACT.md
"Network design"), serially and with a process pool. Slow (a local Ray starts); skipped without
Ray (pip install '.[ray]')."""

from __future__ import annotations

import json
import sys

import pytest

from planner.cli import main

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")

pytestmark = pytest.mark.slow

MIX = (
    "- {model: llama3-8b, global_batch: 32, seq_len: 2048, precision: bf16, share: 0.5}\n"
    "- {model: mixtral-8x7b, global_batch: 64, seq_len: 1024, precision: bf16, share: 0.5}\n"
)
SPACE = (
    "leaf_gpus: 16\ntechnology: [infiniband, roce]\nnic_gbps: [100, 400]\n"
    "fabric: [rail-optimised]\noversubscription: [1, 2]\n"
)


def _design(tmp_path, capsys, *extra: str) -> str:
    w, d = tmp_path / "mix.yaml", tmp_path / "designs.yaml"
    w.write_text(MIX)
    d.write_text(SPACE)
    argv = ["design", "--workload", str(w), "--gpu", "h100-sxm-80gb", "--gpus", "64"]
    assert main([*argv, "--designs", str(d), "--json", *extra]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_ray_json_is_the_local_json(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    serial = _design(tmp_path, capsys, "--workers", "1")
    out = json.loads(serial)
    assert len(out["designs"]) >= 4 and out["frontier"]
    assert _design(tmp_path, capsys, "--workers", "2") == serial
    cache = tmp_path / "cache"
    try:
        ray_out = _design(
            tmp_path, capsys, "--backend", "ray", "--workers", "2", "--cache-dir", str(cache)
        )
    finally:
        ray.shutdown()
    assert ray_out == serial
    assert list(cache.rglob("*.pkl"))
    # A re-run is served from the cache the Ray run filled: it needs no Ray at all.
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    again = _design(tmp_path, capsys, "--backend", "ray", "--cache-dir", str(cache))
    assert again == serial
