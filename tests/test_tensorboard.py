"""``--tensorboard``: a run's rounds as TensorBoard scalars, step = round, time = simulated seconds."""

from __future__ import annotations

import json

import pytest
import yaml

from fedgc.cli.run import main


def test_tensorboard_events_hold_every_round_at_its_simulated_time(tmp_path, tiny_scenario, capsys):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**tiny_scenario, "rounds": 3}))
    out = tmp_path / "run"
    assert main([str(path), "--out", str(out), "--quiet", "--tensorboard"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"accuracy", "loss", "MB/up", "MB/down", "MB/total", "round/duration_s", "clients/completed",
            "clients/late", "clients/cut", "clients/discarded", "density/achieved"} <= tags
    accuracy = list(events.Scalars("accuracy"))
    assert [e.step for e in accuracy] == [1, 2, 3]
    assert [round(e.value, 6) for e in accuracy] == [round(r["accuracy"], 6) for r in rows]
    assert [e.wall_time for e in accuracy] == pytest.approx([r["sim_end_s"] for r in rows])
    total = events.Scalars("MB/total")[-1].value
    assert total == pytest.approx(sum(r["bytes_up"] + r["bytes_down"] for r in rows) / 1e6, rel=1e-6)
