"""The same app on Flower's simulation runtime (Ray, via a local SuperLink and ``flwr run``) and on the
inline engine: same selection, same training, same aggregation, same metrics.

What may differ, and why: Flower's runtime gives runs and nodes random 64-bit ids and messages UUIDs
where the inline engine uses small counters, and those ids are part of every message's metadata on
the wire. So each message's wire size may differ by a few tens of bytes (measured: +25 per model
download, +44 per compressed reply; bound ``ID_BYTES_PER_MESSAGE``), and the simulated transfer times
by what those bytes take on the link (``TIME_RTOL``, relative to small compressed uploads). Everything
computed from the models (accuracy, loss, train loss, density, selection, counts) must be identical.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import tomllib
import uuid

import pytest
import yaml

from fedgc.runs.engines import run_flower, run_inline
from fedgc.scenario.model import dump_scenario, validate

from .conftest import REPO

ID_BYTES_PER_MESSAGE = 64
TIME_RTOL = 0.02  # 64 bytes on a ~4 kB compressed upload: under 2 % of its transfer time
BYTE_KEYS = {"bytes_down": "selected", "bytes_up": "completed", "dense_bytes_up": "completed"}
TIME_KEYS = {"sim_start_s", "sim_end_s", "round_duration_s", "mean_download_s", "mean_compute_s",
             "mean_upload_s", "max_upload_s", "client_upload_s"}


def _rows(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _close_times(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_close_times(x, y) for x, y in zip(a, b))
    return a is not None and b is not None and math.isclose(a, b, rel_tol=TIME_RTOL)


def differences(inline_rows: list[dict], flower_rows: list[dict]) -> list[str]:
    """Every difference beyond the stated tolerances, as readable lines."""
    problems = []
    for a, b in zip(inline_rows, flower_rows, strict=True):
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if x == y:
                continue
            if key in BYTE_KEYS and abs(x - y) <= ID_BYTES_PER_MESSAGE * a[BYTE_KEYS[key]]:
                continue
            if key == "client_upload_bytes" and len(x) == len(y) and all(
                    abs(p - q) <= ID_BYTES_PER_MESSAGE for p, q in zip(x, y)):
                continue
            if key in TIME_KEYS and _close_times(x, y):
                continue
            problems.append(f"round {a['round']} {key}: inline {x!r} flower {y!r}")
    return problems


@pytest.mark.ray
@pytest.mark.parametrize("downlink", [
    {"name": "none"},
    {"name": "topk", "density": 0.05},  # compressed downloads: Flower's runtime keeps each node's replica
])
def test_flower_simulation_runtime_matches_inline(tmp_path, tiny_scenario, downlink):
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    tiny_scenario["compression"] = {"name": "dgc", "density": 0.05, "momentum": 0.9, "warmup_rounds": 1}
    tiny_scenario["strategy"]["fraction"] = 0.5  # seeded selection must pick the same partitions
    tiny_scenario["rounds"] = 3
    tiny_scenario["downlink"] = downlink
    scenario = validate(tiny_scenario)
    inline = run_inline(scenario, tmp_path / "inline", quiet=True)
    flower = run_flower(scenario, tmp_path / "flower", quiet=True)
    inline_rows, flower_rows = _rows(tmp_path / "inline"), _rows(tmp_path / "flower")
    assert [r["round"] for r in flower_rows] == [1, 2, 3]
    assert all(r["completed"] == 2 and r["applied"] == 2 and r["failed"] == 0 for r in flower_rows)
    assert differences(inline_rows, flower_rows) == []
    assert flower.final_accuracy == inline.final_accuracy
    assert flower.updates_applied == inline.updates_applied == 6
    assert (tmp_path / "flower" / "model.pt").stat().st_size > 0
    # clients.jsonl names the same nodes (partition + 1, not Flower's ids) with the same outcomes.
    who = [[(c["round"], c["node"], c["outcome"], c["phase"]) for c in map(json.loads, (tmp_path / e / "clients.jsonl")
            .read_text().splitlines())] for e in ("inline", "flower")]
    assert who[0] == who[1] and len(who[0]) == 6


@pytest.mark.slow
def test_flower_engine_without_ray_is_a_one_line_error(tmp_path):
    """Ray made unimportable the way Python documents it (``sys.modules['ray'] = None``)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nrounds: 1\nengine: flower\ndata: {dataset: digits, num_clients: 2}\n"
                        "model: {name: mlp}\n")
    code = ("import sys; sys.modules['ray'] = None; from fedgc.cli.run import main; "
            f"sys.exit(main([{str(scenario)!r}, '--out', {str(tmp_path / 'out')!r}, '--quiet']))")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: engine 'flower' needs Ray, which is not installed: pip install 'fedgc[ray]'"]


def test_generated_app_names_the_same_components_and_config_keys():
    from fedgc.flower.runtime.flower_engine import APP_PYPROJECT

    ours = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["flwr"]
    generated = tomllib.loads(APP_PYPROJECT)["tool"]["flwr"]
    assert generated["app"]["components"] == ours["app"]["components"]
    assert set(generated["app"]["config"]) == set(ours["app"]["config"])
    assert "federations" not in ours  # `flwr run` would rewrite pyproject.toml (Flower 1.41 migration)


def test_partition_grid_labels_nodes_by_partition(tiny_scenario):
    """The census on the inline grid: node n holds partition n - 1, so labels are the ids themselves."""
    from flwr.app import ConfigRecord, Message, RecordDict

    from fedgc.flower.runtime.inline_grid import InlineGrid
    from fedgc.flower.server.partition_grid import PartitionGrid

    grid = InlineGrid.for_scenario(validate(tiny_scenario))
    partitioned = PartitionGrid.census(grid, expected=4, wait_s=10)
    assert partitioned.label_of == {1: 1, 2: 2, 3: 3, 4: 4}
    assert list(partitioned.get_node_ids()) == [1, 2, 3, 4]
    probe = Message(RecordDict({"c": ConfigRecord({})}), dst_node_id=3, message_type="query.partition")
    (reply,) = partitioned.send_and_receive([probe])
    assert reply.metadata.src_node_id == 3
    assert reply.content.metric_records["partition"]["partition-id"] == 2


def _marked_processes(mark: str) -> list[int]:
    """Live processes (not zombies) whose environment carries ``FEDGC_TEST_MARK=mark``."""
    needle = f"FEDGC_TEST_MARK={mark}".encode() + b"\0"
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state not in (b"Z", b"X"):
            found.append(int(pid))
    return found


def _describe(pids: list[int]) -> list[str]:
    """What each process is: state, parent, session, command line (for a failure message)."""
    described = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
            with open(f"/proc/{pid}/environ", "rb") as f:
                token = b"FEDGC_RUNTIME_TOKEN=" in f.read()
        except OSError:
            described.append(f"{pid}: gone")
            continue
        described.append(f"{pid}: state {fields[0].decode()} ppid {int(fields[1])} sid {int(fields[3])} "
                         f"token {token} {cmdline}")
    return described


@pytest.mark.ray
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the runtime's processes")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_flower_run_leaves_no_process_and_stops_writing(tmp_path, tiny_scenario, sig):
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    tiny_scenario.update(engine="flower", rounds=2000, checkpoint_every=0)
    tiny_scenario["data"]["num_clients"] = 2
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    out, mark = tmp_path / "out", uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDGC_TEST_MARK": mark}
    # As from a terminal: a shell without job control starts background commands with SIGINT ignored
    # (and Python then keeps ignoring it), which is not the Ctrl-C this test is about.
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(out), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509 — no threads fork here
    metrics = out / "metrics.jsonl"
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
                break
            time.sleep(0.2)
        assert proc.poll() is None and metrics.exists(), "the run should be going when it is interrupted"
        assert len(_marked_processes(mark)) > 3, "the runtime runs in several processes (SuperLink, Ray, ...)"
        proc.send_signal(sig)
        code = proc.wait(timeout=240)  # the clean-up waits for every process; slow on a loaded machine
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130, proc.stderr.read()
    # The first signal stops the run after its round: the ServerApp (in Flower's process) writes its
    # checkpoint, summary, plots and model before the runtime is stopped.
    assert proc.stderr.read().strip().splitlines()[-1].startswith("interrupted after round ")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_reason"] == "interrupted" and (out / "checkpoint.pt").is_file()
    assert (out / "model.pt").is_file() and (out / "plots").is_dir()
    survivors = _marked_processes(mark)
    assert survivors == [], f"a process of the runtime outlived the command: {_describe(survivors)}"
    size = metrics.stat().st_size
    time.sleep(5)
    assert metrics.stat().st_size == size, "metrics.jsonl grew after the command exited"


def test_resume_of_a_flower_run_without_a_checkpoint_is_a_one_line_error_that_changes_nothing(tmp_path, tiny_scenario,
                                                                                              capsys):
    """Refused in this process, before the runtime starts."""
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    from fedgc.cli.run import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.yaml").write_text(dump_scenario(validate({**tiny_scenario, "engine": "flower"})))
    (run / "metrics.jsonl").write_text('{"round": 1}\n')
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    assert main(["--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "no checkpoint.pt" in err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.name != ".fedgc.lock"} == before


@pytest.mark.ray
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the runtime's processes")
def test_sigkill_of_a_flower_run_then_resume_gives_the_uninterrupted_metrics(tmp_path, tiny_scenario):
    """kill -9 of the command and of every process of the runtime (a crashed machine), then ``--resume``:
    the server's parts come back from the checkpoint and each node gets its Context.state back (DGC
    memories, pending updates, downlink replicas), so the run ends with the metrics of an
    uninterrupted run (the inline engine's, within the id-size tolerance of every flower run)."""
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    tiny_scenario.update(rounds=16, checkpoint_every=2, downlink={"name": "topk", "density": 0.1},
                         compression={"name": "dgc", "density": 0.05, "momentum": 0.9})
    tiny_scenario["strategy"]["fraction"] = 0.5
    reference = tmp_path / "inline"
    run_inline(validate(tiny_scenario), reference, quiet=True)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**tiny_scenario, "engine": "flower"}))
    killed, mark = tmp_path / "killed", uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDGC_TEST_MARK": mark}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(killed), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = killed / "metrics.jsonl"
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            if metrics.exists() and len(metrics.read_text().splitlines()) >= 5:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()[-500:]}"
        for pid in _marked_processes(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    rows_at_kill = len(metrics.read_text().splitlines())
    assert 5 <= rows_at_kill < 16 and (killed / "checkpoint.pt").is_file()
    assert not (killed / "summary.json").exists()
    env["FEDGC_TEST_MARK"] = uuid.uuid4().hex
    done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(killed), "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert differences(_rows(reference), _rows(killed)) == []
