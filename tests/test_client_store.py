"""The client-state store (``fedgc.flower.state.client_store``, scenario key ``client_state``): on disk it gives
the in-memory run's metrics byte for byte, survives a crash and a resume, and a damaged store is one
line, never a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from flwr.app import ArrayRecord, ConfigRecord, RecordDict

from fedgc.cli.run import main
from fedgc.core.checkpoint import CHECKPOINT, CheckpointError
from fedgc.core.checkpoint import load as load_checkpoint
from fedgc.flower.state.client_store import STORE_FILE, check_store_for_resume, store_kind
from fedgc.flower.state.disk_store import DamagedState, DiskStore, StoreError
from fedgc.flower.state.state_bytes import encode_state
from fedgc.scenario.model import validate
from tests.conftest import REPO
from tests.test_checkpoint import stateful_scenario


def write(path: Path, tree: dict) -> Path:
    path.write_text(yaml.safe_dump(tree))
    return path


def scenario_with(tiny: dict, store: str, rounds: int = 6, every: int = 3) -> dict:
    tree = stateful_scenario(tiny, rounds=rounds, every=every)
    tree["downlink"] = {"name": "topk", "density": 0.05}  # the clients' replicas are stored too
    tree["client_state"] = {"store": store}
    return tree


def _state(value: float) -> RecordDict:
    return RecordDict({"fedgc.memory": ArrayRecord({"u": torch.full((3, 4), value)}),
                       "c": ConfigRecord({"k": 1})})


def _u(store: DiskStore, client: int) -> torch.Tensor:
    return torch.from_numpy(store.load(client).array_records["fedgc.memory"]["u"].numpy())


def test_a_disk_store_keeps_states_by_round_and_goes_back_to_a_checkpoint(tmp_path):
    store = DiskStore(tmp_path / STORE_FILE)
    assert len(store.load(1)) == 0
    store.save(1, 1, _state(1.0))
    store.save(2, 1, _state(2.0))
    mark = store.state_dict()
    assert mark["store"]["generation"] == 1
    store.save(1, 2, _state(3.0))
    store.save(3, 3, _state(4.0))
    assert torch.equal(_u(store, 1), torch.full((3, 4), 3.0))
    store.close()
    reopened = DiskStore(tmp_path / STORE_FILE)
    reopened.load_state_dict(mark)
    assert torch.equal(_u(reopened, 1), torch.full((3, 4), 1.0))
    assert reopened.clients() == [1, 2]
    assert dict(reopened.load(2).config_records["c"]) == {"k": 1}


def test_a_client_keeps_at_most_the_rows_its_checkpoints_need(tmp_path):
    store = DiskStore(tmp_path / STORE_FILE)
    for generation in range(1, 30):
        store.save(1, generation, _state(float(generation)))
        if generation % 5 == 0:
            store.state_dict()
    rows = sqlite3.connect(tmp_path / STORE_FILE).execute("SELECT COUNT(*) FROM state").fetchone()[0]
    assert rows <= 3


def _process_io() -> tuple[int, int]:
    """Bytes this process has written and read through system calls (Linux's ``/proc/self/io``)."""
    fields = dict(line.split(":") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["wchar"]), int(fields["rchar"])


@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="counts the bytes written in /proc/self/io (Linux)")
def test_a_round_of_saves_and_its_checkpoint_write_each_state_once(tmp_path):
    """What a round costs the disk: each client's 1.6 MB state (DGC's u and v of mnist_2nn) goes into
    the file once, plus the few pages a commit changes in place (with their journal copies); nothing
    is read back. (A write-ahead log wrote it into the log, read it back at the checkpoint and wrote
    it into the file: 2.3x written, 1x read.)"""
    generator = torch.Generator().manual_seed(0)
    tensors = {"u": torch.randn(199_210, generator=generator), "v": torch.randn(199_210, generator=generator)}
    state = RecordDict({"fedgc.memory": ArrayRecord(dict(tensors))})
    size = sum(len(a.data) for a in state.array_records["fedgc.memory"].values())
    store = DiskStore(tmp_path / STORE_FILE)
    clients = range(1, 13)
    for client in clients:  # round 1 fills the store (the file grows)
        store.save(client, 1, state)
    store.state_dict()
    wrote, read = _process_io()
    for generation in (2, 3):  # then rounds in a steady state: a save replaces a superseded row
        for client in clients:
            store.save(client, generation, state)
        store.state_dict()  # a checkpoint every round: whatever a save left for later is in it
    wrote_after, read_after = _process_io()
    saves = 2 * len(clients)
    assert (wrote_after - wrote) / saves < 1.75 * size
    assert (read_after - read) / saves < 0.05 * size
    assert torch.equal(_u_of(store.load(5)), tensors["u"])
    store.close()


def _u_of(state: RecordDict) -> torch.Tensor:
    return torch.from_numpy(state.array_records["fedgc.memory"]["u"].numpy())


def test_a_store_a_write_ahead_log_fedgc_left_is_read_and_resumed(tmp_path):
    """A store of the same format written by the fedgc that kept it in a write-ahead log, killed with
    rows still in its log: it is read (the log folded into the file) and resumes to its checkpoint."""
    path = tmp_path / "old" / STORE_FILE
    path.parent.mkdir()
    store = DiskStore(path)
    store.save(1, 1, _state(1.0))
    store.save(2, 1, _state(2.0))
    mark = store.state_dict()
    store.close()
    old = sqlite3.connect(path, isolation_level=None)
    assert old.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    old.execute("PRAGMA wal_autocheckpoint = 0")
    data = encode_state(_state(3.0))
    old.execute("INSERT INTO state VALUES (1, 2, ?, ?)", (store.row_crc(1, 2, data), data))  # round 2, in the log
    killed = tmp_path / "killed"
    killed.mkdir()
    for name in (STORE_FILE, STORE_FILE + "-wal"):  # what a killed process leaves: the file and its log
        shutil.copy(path.parent / name, killed / name)
    old.close()
    assert (killed / (STORE_FILE + "-wal")).stat().st_size > 0

    reopened = DiskStore(killed / STORE_FILE)
    assert torch.equal(_u(reopened, 1), torch.full((3, 4), 3.0))  # the row in the log is read
    assert reopened._connection().execute("PRAGMA journal_mode").fetchone() == ("truncate",)
    assert not (killed / (STORE_FILE + "-wal")).exists()
    check_store_for_resume(mark, killed)
    reopened.load_state_dict(mark)
    assert torch.equal(_u(reopened, 1), torch.full((3, 4), 1.0))
    assert torch.equal(_u(reopened, 2), torch.full((3, 4), 2.0))
    reopened.close()


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs mounted for the test (root only; skipped otherwise): a disk that fills."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode(errors='replace').strip()[:80]})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_store_that_fills_the_disk_says_so_in_one_line_and_goes_back_to_its_checkpoint(small_disk):
    """A save that finds the disk full is one line saying so (not SQLite's complaint about a rollback
    it had already done), the rows committed before it are intact, and the store still goes back to
    its checkpoint on that full disk (under the write-ahead log it could not: deleting needs the log)."""
    mount = small_disk
    generator = torch.Generator().manual_seed(0)
    u = torch.randn(65_536, generator=generator)  # 256 KiB a state
    state = RecordDict({"fedgc.memory": ArrayRecord({"u": u})})
    store = DiskStore(mount / STORE_FILE)
    store.save(1, 1, state)
    store.save(2, 1, state)
    mark = store.state_dict()
    saved = []
    with pytest.raises(StoreError) as full:
        for client in range(3, 100):
            store.save(client, 2, state)
            saved.append(client)
    assert str(full.value) == f"client-state store {mount / STORE_FILE}: database or disk is full"
    assert saved  # the disk filled part way
    store.close()
    reopened = DiskStore(mount / STORE_FILE)
    assert reopened.clients() == [1, 2, *saved]
    assert all(torch.equal(_u_of(reopened.load(c)), u) for c in [1, 2, *saved])
    reopened.load_state_dict(mark)
    assert reopened.clients() == [1, 2]
    reopened.close()



def test_a_rows_crc_is_zlibs_crc_32_whichever_library_computes_it(tmp_path):
    """The store's CRC-32 is zlib-ng's where it is installed (a dependency: about 13 times zlib's speed
    here) and zlib's otherwise: the same values, seeds included, so a store written with one is read
    with the other. The stored CRC is checked against zlib's own computation of the row's formula."""
    import random
    import zlib

    from fedgc.flower.state import disk_store

    assert disk_store.crc32.__module__.startswith("zlib_ng")  # installed with fedgc: the fast one is used
    rng = random.Random(0)
    for size in (0, 1, 15, 16, 63, 64, 65, 4095, 1 << 16, 1_600_000 + 3):
        data = rng.randbytes(size)
        for seed in (0, 1, 0xFFFFFFFF, 0x1234ABCD):
            assert disk_store.crc32(data, seed) == zlib.crc32(data, seed), (size, seed)
    store = DiskStore(tmp_path / STORE_FILE)
    store.save(3, 7, _state(2.0))
    ((crc, data),) = sqlite3.connect(tmp_path / STORE_FILE).execute("SELECT crc, data FROM state").fetchall()
    assert crc == zlib.crc32(data, zlib.crc32(f"fedgc-state-row {store.id} 3 7\n".encode()))
    # A process without zlib-ng uses zlib's own, reads the row zlib-ng wrote and writes one zlib-ng reads.
    script = ("import sys, zlib; sys.modules['zlib_ng'] = None\n"
              "from pathlib import Path\n"
              "from fedgc.flower.state import disk_store\n"
              "assert disk_store.crc32 is zlib.crc32\n"
              "store = disk_store.DiskStore(Path(sys.argv[1]))\n"
              "state = store.load(3)\n"
              "store.save(4, 8, state)\n"
              "print(float(state.array_records['fedgc.memory']['u'].numpy()[0, 0]))\n")
    store.close()
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / STORE_FILE)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip() == "2.0", proc.stderr[-2000:]
    assert _u(DiskStore(tmp_path / STORE_FILE), 4).eq(2.0).all()


def test_a_damaged_row_is_that_clients_failure_and_a_damaged_store_is_refused_on_resume(tmp_path):
    store = DiskStore(tmp_path / STORE_FILE)
    store.save(1, 1, _state(1.0))
    mark = store.state_dict()
    conn = sqlite3.connect(tmp_path / STORE_FILE)
    conn.execute("UPDATE state SET crc = crc + 1")
    conn.commit()
    with pytest.raises(DamagedState, match="client 1's state is damaged"):
        store.load(1)
    with pytest.raises(StoreError, match="does not match its CRC"):
        store.load_state_dict(mark)
    with pytest.raises(StoreError, match="not the one this checkpoint was taken with"):
        store.load_state_dict({"store": {**mark["store"], "id": "someone-else"}})


def test_a_row_read_in_another_place_is_damaged_and_a_malformed_record_is_the_checkpoints_fault(tmp_path):
    """A row's CRC is bound to its client, round and store: swapped mid-run, it is that client's
    failure (``DamagedState``); a checkpoint whose record of the rows is malformed is refused as the
    checkpoint's fault (a plain ``ValueError``, which the resume reports as checkpoint.pt's)."""
    store = DiskStore(tmp_path / STORE_FILE)
    store.save(1, 1, _state(1.0))
    store.save(2, 1, _state(2.0))
    mark = store.state_dict()
    conn = sqlite3.connect(tmp_path / STORE_FILE)
    conn.execute("UPDATE state SET client = -client")  # then 1 <-> 2, bytes and CRCs as they were
    conn.execute("UPDATE state SET client = 3 + client")
    conn.commit()
    conn.close()
    with pytest.raises(DamagedState, match="client 1's state is damaged"):
        store.load(1)
    rows = mark["store"]["rows"]
    for bad in (rows.to(torch.int32), rows.flip(0), rows + torch.tensor([0, 5, 0]), rows[:, :2], [[1, 1, 0]]):
        with pytest.raises(ValueError, match="client-state rows are malformed") as refused:
            store.load_state_dict({"store": {**mark["store"], "rows": bad}})
        assert not isinstance(refused.value, StoreError)


def test_auto_picks_the_disk_for_a_large_population(tiny_scenario):
    tree = dict(tiny_scenario, client_state={"store": "auto", "auto_disk_gb": 1e-6})
    assert store_kind(validate(tree)) == "disk"
    tree["client_state"]["auto_disk_gb"] = 1e3
    assert store_kind(validate(tree)) == "memory"


def test_disk_and_memory_stores_give_byte_identical_metrics(tmp_path, tiny_scenario):
    for store in ("memory", "disk"):
        path = write(tmp_path / f"{store}.yaml", scenario_with(tiny_scenario, store))
        assert main([str(path), "--out", str(tmp_path / store), "--quiet"]) == 0
    assert (tmp_path / "disk" / STORE_FILE).is_file()
    assert not (tmp_path / "memory" / STORE_FILE).exists()
    for name in ("metrics.jsonl", "clients.jsonl"):
        assert (tmp_path / "disk" / name).read_bytes() == (tmp_path / "memory" / name).read_bytes()


def _crashed_copy(full: Path, crashed: Path, rows: int) -> None:
    """``full``'s folder as a crash after ``rows`` rounds would leave it: the checkpoint of round 3, and
    the store with every client's states up to the end (rows written after the checkpoint)."""
    crashed.mkdir()
    for name in ("scenario.yaml", CHECKPOINT, STORE_FILE, STORE_FILE + "-wal"):
        if (full / name).exists():
            shutil.copy(full / name, crashed / name)
    lines = (full / "metrics.jsonl").read_text().splitlines(keepends=True)
    (crashed / "metrics.jsonl").write_text("".join(lines[:rows]) + lines[rows][:17])


def test_a_disk_store_ahead_of_its_checkpoint_resumes_to_the_uninterrupted_metrics(tmp_path, tiny_scenario):
    path = write(tmp_path / "s.yaml", scenario_with(tiny_scenario, "disk"))
    full = tmp_path / "full"
    assert main([str(path), "--out", str(full), "--quiet"]) == 0
    crashed = tmp_path / "crashed"
    _crashed_copy(full, crashed, 5)
    assert main(["--resume", str(crashed)]) == 0
    assert (crashed / "metrics.jsonl").read_bytes() == (full / "metrics.jsonl").read_bytes()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "crc"])
def test_a_damaged_store_on_resume_is_one_line(tmp_path, tiny_scenario, capsys, damage):
    path = write(tmp_path / "s.yaml", scenario_with(tiny_scenario, "disk"))
    full = tmp_path / "full"
    assert main([str(path), "--out", str(full), "--quiet"]) == 0
    crashed = tmp_path / "crashed"
    _crashed_copy(full, crashed, 5)
    store = crashed / STORE_FILE
    if damage == "crc":
        conn = sqlite3.connect(store)
        conn.execute("UPDATE state SET data = substr(data, 1, length(data) - 1) || x'00' WHERE generation <= 3")
        conn.commit()
        conn.close()
    else:
        (crashed / (STORE_FILE + "-wal")).unlink(missing_ok=True)
        data = store.read_bytes()
        store.write_bytes(os.urandom(len(data)) if damage == "garbage" else data[: len(data) // 3])
    capsys.readouterr()
    assert main(["--resume", str(crashed)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "client-state store" in err and "Traceback" not in err, err
    assert str(store) in err and CHECKPOINT not in err, err  # the damaged file is the store, not the checkpoint


MARK = 6  # the bound run's checkpoint: 8 rounds, one every 3; the store holds rows up to round 8


@pytest.fixture(scope="module")
def bound_run(tmp_path_factory) -> Path:
    """A disk-store run of 8 rounds with a checkpoint every 3 (every kind of client state, downlink
    replicas included), uninterrupted: its checkpoint is of round 6, its store holds rows up to round 8."""
    tiny = {"name": "bound", "seed": 7, "model": {"name": "mlp"}, "eval": {"target_accuracy": 0.5},
            "client": {"local_steps": 3, "batch_size": 16, "lr": 0.1}}
    folder = tmp_path_factory.mktemp("bound")
    path = write(folder / "s.yaml", scenario_with(tiny, "disk", rounds=8, every=3))
    assert main([str(path), "--out", str(folder / "full"), "--quiet"]) == 0
    assert load_checkpoint(folder / "full")[0]["run"]["round"] == MARK
    return folder / "full"


def _newest(conn: sqlite3.Connection, upto: int = MARK) -> list[tuple[int, int, int, bytes]]:
    """Each client's newest row up to round ``upto``: (client, generation, crc, data), by client."""
    return conn.execute("SELECT client, MAX(generation), crc, data FROM state WHERE generation <= ? GROUP BY client "
                        "ORDER BY client", (upto,)).fetchall()


def _rows(conn: sqlite3.Connection) -> set[tuple[int, int]]:
    return set(conn.execute("SELECT client, generation FROM state").fetchall())


def _swap(conn: sqlite3.Connection, store: Path, upto: int = MARK) -> None:
    """Two clients' rows (bytes and CRC) exchanged, as a file-level mix-up would."""
    (a, ga, crc_a, data_a), (b, gb, crc_b, data_b) = _newest(conn, upto)[:2]
    assert data_a != data_b
    conn.execute("UPDATE state SET crc = ?, data = ? WHERE client = ? AND generation = ?", (crc_b, data_b, a, ga))
    conn.execute("UPDATE state SET crc = ?, data = ? WHERE client = ? AND generation = ?", (crc_a, data_a, b, gb))


def _copy(conn: sqlite3.Connection, store: Path) -> None:
    """One client's bytes copied over another's row, with the CRC its new place asks for: every row
    matches its CRC, only the checkpoint's record can tell."""
    (_, _, _, data_a), (b, gb, _, data_b) = _newest(conn)[:2]
    assert data_a != data_b
    conn.execute("UPDATE state SET crc = ?, data = ? WHERE client = ? AND generation = ?",
                 (DiskStore(store).row_crc(b, gb, data_a), data_a, b, gb))


def _delete_client(conn: sqlite3.Connection, store: Path) -> None:
    conn.execute("DELETE FROM state WHERE client = ?", (_newest(conn)[0][0],))


def _delete_all(conn: sqlite3.Connection, store: Path) -> None:
    conn.execute("DELETE FROM state")


def _delete_mark_row(conn: sqlite3.Connection, store: Path) -> None:
    """The row at the checkpoint's round of a client that also has an older one: the old code handed
    that client the older state."""
    rows = _rows(conn)
    client = next(c for c, g, _, _ in _newest(conn) if g == MARK and any(h < MARK for d, h in rows if d == c))
    conn.execute("DELETE FROM state WHERE client = ? AND generation = ?", (client, MARK))


def _move_past(conn: sqlite3.Connection, store: Path) -> None:
    """A client's row at the checkpoint's round renumbered past it, with the CRC its new place asks for
    (the client also has an older row: the old code handed it that one)."""
    rows = _rows(conn)
    client, _, _, data = next(r for r in _newest(conn) if r[1] == MARK and (r[0], MARK + 1) not in rows
                              and any(h < MARK for d, h in rows if d == r[0]))
    conn.execute("UPDATE state SET generation = ?, crc = ? WHERE client = ? AND generation = ?",
                 (MARK + 1, DiskStore(store).row_crc(client, MARK + 1, data), client, MARK))


@pytest.mark.parametrize(("tamper", "refusal"), [
    (_swap, "does not match its CRC"),
    (_copy, "is not the one the checkpoint recorded"),
    (_delete_client, "which the checkpoint recorded, is missing"),
    (_delete_all, "which the checkpoint recorded, is missing"),
    (_delete_mark_row, f"the checkpoint recorded round {MARK}"),
    (_move_past, f"the checkpoint recorded round {MARK} (a row deleted, or moved)"),
], ids=["swapped", "copied", "one-client-deleted", "all-deleted", "mark-row-deleted", "moved-past-mark"])
def test_a_store_whose_rows_were_moved_between_clients_or_rounds_is_refused_on_resume(tmp_path, bound_run, capsys,
                                                                                     tamper, refusal):
    """Every client's row a resume would hand out is bound to its client, round and store, and the
    checkpoint records which row each client had: rows swapped, copied, deleted or renumbered behind
    fedgc's back are one line naming the store (exit 2), and nothing of the run folder changes."""
    crashed = tmp_path / "crashed"
    _crashed_copy(bound_run, crashed, 7)
    store = crashed / STORE_FILE
    conn = sqlite3.connect(store)
    tamper(conn, store)
    conn.commit()
    conn.close()
    kept = {name: (crashed / name).read_bytes() for name in (CHECKPOINT, "metrics.jsonl")}
    capsys.readouterr()
    assert main(["--resume", str(crashed), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"client-state store {store}" in err and refusal in err and CHECKPOINT not in err, err
    assert {name: (crashed / name).read_bytes() for name in kept} == kept
    # engine: flower checks the same before its runtime starts (its ServerApp would fail in another process)
    with pytest.raises(CheckpointError, match=re.escape(err.removeprefix("error: ").strip())):
        check_store_for_resume(load_checkpoint(crashed)[0]["transport"], crashed)


def test_a_clean_store_resumes_to_the_uninterrupted_metrics_and_a_checkpoint_records_every_clients_row(
        tmp_path, bound_run):
    """The untouched store resumes (byte-identical metrics); the checkpoint's record is each client's
    newest row (client, round, CRC), read from an index that does not touch the states."""
    state, _ = load_checkpoint(bound_run)
    conn = sqlite3.connect(bound_run / STORE_FILE)
    recorded = state["transport"]["store"]["rows"]
    assert recorded.tolist() == [[c, g, crc] for c, g, crc, _ in _newest(conn)]
    plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN SELECT client, MAX(generation), crc FROM state "
                                                  "GROUP BY client ORDER BY client").fetchall())
    conn.close()
    assert "COVERING INDEX" in plan, plan
    crashed = tmp_path / "crashed"
    _crashed_copy(bound_run, crashed, 7)
    assert main(["--resume", str(crashed), "--quiet"]) == 0
    assert (crashed / "metrics.jsonl").read_bytes() == (bound_run / "metrics.jsonl").read_bytes()


def test_a_checkpoint_that_predates_the_binding_or_an_old_store_is_refused_in_one_line(tmp_path, bound_run, capsys):
    """A checkpoint that records no client's row (written before the binding), or a store of format 1
    (rows not bound), cannot be verified: refused, one line naming the store, nothing changed."""
    from fedgc.core.checkpoint import read_file, write_file

    old_checkpoint = tmp_path / "old-checkpoint"
    _crashed_copy(bound_run, old_checkpoint, 7)
    payload, _ = read_file(old_checkpoint / CHECKPOINT)
    del payload["state"]["transport"]["store"]["rows"]
    write_file(old_checkpoint / CHECKPOINT, payload)
    old_store = tmp_path / "old-store"
    _crashed_copy(bound_run, old_store, 7)
    conn = sqlite3.connect(old_store / STORE_FILE)
    conn.execute("UPDATE meta SET value = 1 WHERE key = 'format'")
    conn.commit()
    conn.close()
    for folder, refusal in ((old_checkpoint, "the checkpoint predates binding the store's rows to it"),
                            (old_store, "has format 1")):
        kept = (folder / "metrics.jsonl").read_bytes()
        capsys.readouterr()
        assert main(["--resume", str(folder), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"client-state store {folder / STORE_FILE}" in err and refusal in err, err
        assert (folder / "metrics.jsonl").read_bytes() == kept


@pytest.mark.slow
def test_sigkill_with_a_disk_store_then_resume_gives_identical_metrics(tmp_path, tiny_scenario):
    tree = scenario_with(tiny_scenario, "disk", rounds=40, every=2)
    tree["model"] = {"name": "small_cnn"}
    tree["client"] = {"local_steps": 10, "batch_size": 16, "lr": 0.05}
    path = write(tmp_path / "s.yaml", tree)
    reference = tmp_path / "reference"
    assert main([str(path), "--out", str(reference), "--quiet"]) == 0
    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "fedgc.cli.run", str(path), "--out", str(killed), "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    metrics = killed / "metrics.jsonl"
    deadline, rows = time.monotonic() + 120, 0
    while time.monotonic() < deadline and proc.poll() is None:
        rows = len(metrics.read_text().splitlines()) if metrics.exists() else 0
        if rows >= 5:
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (killed / CHECKPOINT).is_file() and (killed / STORE_FILE).is_file()
    # The killed run's store with two clients' rows swapped: the command line refuses it in one line.
    swapped = tmp_path / "swapped"
    shutil.copytree(killed, swapped)
    conn = sqlite3.connect(swapped / STORE_FILE)
    _swap(conn, swapped / STORE_FILE, load_checkpoint(swapped)[0]["transport"]["store"]["generation"])
    conn.commit()
    conn.close()
    refused = subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(swapped), "--quiet"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"client-state store {swapped / STORE_FILE} is damaged" in refused.stderr, refused.stderr
    done = subprocess.run([sys.executable, "-m", "fedgc.cli.run", "--resume", str(killed), "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert metrics.read_bytes() == (reference / "metrics.jsonl").read_bytes()


@pytest.mark.ray
def test_flower_runtime_with_a_disk_store_matches_inline_in_memory(tmp_path, tiny_scenario, capsys):
    """Flower's simulation runtime with ``client_state.store: disk``: each node's state is loaded from the
    run folder's store for its message (``client_store_mod``) and Flower's contexts hold nothing."""
    pytest.importorskip("ray", reason="engine flower needs Ray: pip install 'fedgc[ray]'")
    from fedgc.runs.engines import run_inline
    from tests.test_flower_engine import _rows, differences

    tiny_scenario["compression"] = {"name": "dgc", "density": 0.05, "momentum": 0.9, "warmup_rounds": 1}
    tiny_scenario["strategy"]["fraction"] = 0.5
    tiny_scenario["rounds"] = 3
    tiny_scenario["checkpoint_every"] = 2
    tiny_scenario["downlink"] = {"name": "topk", "density": 0.05}
    inline = run_inline(validate({**tiny_scenario, "client_state": {"store": "memory"}}), tmp_path / "inline", quiet=True)
    full = tmp_path / "flower"
    path = write(tmp_path / "s.yaml", {**tiny_scenario, "engine": "flower", "client_state": {"store": "disk"}})
    assert main([str(path), "--out", str(full), "--quiet"]) == 0
    assert differences(_rows(tmp_path / "inline"), _rows(full)) == []
    assert json.loads((full / "summary.json").read_text())["final_accuracy"] == inline.final_accuracy
    assert DiskStore(full / STORE_FILE).clients()  # the states are in the run folder's store

    # The checkpoint (round 2) is the store's mark, not every node's state gathered by the server;
    # a crash after round 3 (the store ahead of the checkpoint) resumes to the same rows, and a store
    # with two clients' rows swapped is refused in one line naming it before the runtime starts.
    state, _ = load_checkpoint(full)
    assert state["run"]["round"] == 2 and set(state["transport"]) == {"store"}
    crashed = tmp_path / "crashed"
    _crashed_copy(full, crashed, 2)
    swapped = tmp_path / "swapped"  # the same, with two clients' rows swapped: refused in one line
    shutil.copytree(crashed, swapped)
    conn = sqlite3.connect(swapped / STORE_FILE)
    _swap(conn, swapped / STORE_FILE, 2)
    conn.commit()
    conn.close()
    assert main(["--resume", str(crashed), "--quiet"]) == 0
    assert differences(_rows(full), _rows(crashed)) == []
    capsys.readouterr()
    assert main(["--resume", str(swapped), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"client-state store {swapped / STORE_FILE} is damaged" in err, err


def test_a_disk_store_adopts_the_states_a_checkpoint_holds_itself(tmp_path):
    """A checkpoint written with the states in it (the memory store, or fedgc before the store) resumes
    into a disk store: they become its only rows."""
    from fedgc.flower.state.client_state import records_state

    store = DiskStore(tmp_path / STORE_FILE)
    store.save(5, 9, _state(9.0))  # a row the checkpoint does not know
    store.load_state_dict({"contexts": {1: records_state(_state(1.0)), 2: records_state(_state(2.0))}})
    assert store.clients() == [1, 2]
    assert torch.equal(_u(store, 2), torch.full((3, 4), 2.0))
    assert dict(store.load(1).config_records["c"]) == {"k": 1}


def test_a_temporary_store_left_by_a_killed_process_is_removed_by_the_next_one(tmp_path, monkeypatch):
    """A run without a run folder keeps its disk store in a temporary folder; SIGKILL leaves it behind
    (nothing in the process can run), so the next temporary store removes the folders of dead processes."""
    import signal
    import subprocess
    import sys
    import tempfile

    from fedgc.flower.runtime.inline_grid import STORE_DIR_PREFIX
    from fedgc.flower.state.disk_store import open_disk_store, release_under
    from fedgc.runs.temporary_folders import TemporaryFolder

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    code = ("import os, signal, sys; from fedgc.flower.state.disk_store import open_disk_store\n"
            "from fedgc.runs.temporary_folders import TemporaryFolder\n"
            f"d = TemporaryFolder({STORE_DIR_PREFIX!r}); open_disk_store(d.path / 'client-state.sqlite')\n"
            "print(d.path, flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TMPDIR": str(tmp_path)}, check=False)
    assert killed.returncode == -signal.SIGKILL
    left = Path(killed.stdout.strip())
    assert left.parent == tmp_path and (left / "client-state.sqlite").exists()
    alive = tmp_path / f"{STORE_DIR_PREFIX}{os.getpid()}-x"  # a live process's folder is not touched
    alive.mkdir()

    mine = TemporaryFolder(STORE_DIR_PREFIX)
    open_disk_store(mine.path / "client-state.sqlite")
    assert not left.exists() and alive.exists() and mine.path.exists()
    release_under(mine.path)
    mine.cleanup()
    assert not mine.path.exists()


def test_a_run_without_a_folder_keeps_its_disk_store_in_a_temporary_folder_it_removes(tmp_path, monkeypatch,
                                                                                       tiny_scenario):
    """``fedgc.run(out=None)`` with ``client_state.store: disk``: the store lives in a temporary folder
    named after this process while the run goes on, and nothing of it is left once the run has returned."""
    import gc
    import tempfile

    import fedgc
    from fedgc.flower.runtime.inline_grid import STORE_DIR_PREFIX

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    seen: list[dict[str, list[str]]] = []  # per round: each store folder and the files in it

    def look(record) -> None:
        seen.append({f.name: sorted(p.name for p in f.iterdir())
                     for f in tmp_path.glob(f"{STORE_DIR_PREFIX}{os.getpid()}-*")})

    tree = scenario_with(tiny_scenario, "disk")
    done = fedgc.run(tree, on_round=look)
    gc.collect()
    assert len(done.rounds) == tree["rounds"] == len(seen)
    assert all(len(folders) == 1 and STORE_FILE in next(iter(folders.values())) for folders in seen), seen
    assert len({name for folders in seen for name in folders}) == 1, "one folder for the whole run"
    assert not list(tmp_path.glob(f"{STORE_DIR_PREFIX}*")), "the temporary store folder was left behind"


def test_the_store_thread_reads_ahead_and_writes_behind_with_the_same_results(tmp_path):
    """The inline engine's store (``ThreadedStore``): a state read ahead of a later save of its client
    is read again, so every load gives the newest state saved before it; a checkpoint records every
    save queued before it; the file holds what the store alone would have written."""
    from fedgc.flower.state.store_thread import MAX_AHEAD, ThreadedStore

    store = ThreadedStore(DiskStore(tmp_path / STORE_FILE, fresh=True))
    store.save(1, 1, _state(1.0))
    store.prefetch(1)  # queued before the next save of client 1: not what a load after it may give
    store.save(1, 2, _state(2.0))
    assert torch.equal(_u(store, 1), torch.full((3, 4), 2.0))
    store.prefetch(1)
    assert torch.equal(_u(store, 1), torch.full((3, 4), 2.0))  # read ahead after the save: taken
    for client in range(2, 12):
        store.prefetch(client)  # never loaded: at most MAX_AHEAD wait, the rest are dropped
        assert len(store._ahead) <= MAX_AHEAD
        store.save(client, 2, _state(float(client)))
    assert len(store.load(99)) == 0  # a client never saved: an empty state, as from the store alone
    mark = store.state_dict()  # after every queued save
    assert mark["store"]["rows"][:, 0].tolist() == list(range(1, 12))
    store.close()
    plain = DiskStore(tmp_path / STORE_FILE)
    assert [float(_u(plain, c)[0, 0]) for c in range(1, 12)] == [2.0, *map(float, range(2, 12))]
    plain.check_mark(mark)
    plain.close()


def test_a_write_the_store_thread_could_not_make_stops_the_round_in_one_line(small_disk):
    """A save queued on the I/O thread that finds the disk full is raised, as the same one line, by
    the next call into the store or at the latest by ``flush`` (the grid's end of a round); the
    states written before it are intact and the store goes back to its checkpoint."""
    from fedgc.flower.state.store_thread import ThreadedStore

    mount = small_disk
    u = torch.randn(65_536, generator=torch.Generator().manual_seed(0))  # 256 KiB a state
    state = RecordDict({"fedgc.memory": ArrayRecord({"u": u})})
    store = ThreadedStore(DiskStore(mount / STORE_FILE))
    store.save(1, 1, state)
    store.save(2, 1, state)
    mark = store.state_dict()
    with pytest.raises(StoreError) as full:
        for client in range(3, 100):
            store.save(client, 2, state)
        store.flush()
    assert str(full.value) == f"client-state store {mount / STORE_FILE}: database or disk is full"
    store.close()
    reopened = DiskStore(mount / STORE_FILE)
    assert {1, 2} <= set(reopened.clients())
    assert all(torch.equal(_u_of(reopened.load(c)), u) for c in reopened.clients())
    reopened.load_state_dict(mark)
    assert reopened.clients() == [1, 2]
    reopened.close()
