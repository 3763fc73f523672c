"""Benchmark: the client-state store's throughput (``fedgc.flower.state.client_store``).

One stateful client's state as the ClientApp stores it (``pack_state`` of DGC's fp32 momentum u and
velocity v, dense) for ``mnist_2nn`` (199,210 parameters) and ``mnist_cnn`` (1,663,370): the time to
write it to the disk store (a first row, and a row that supersedes one), to read it back, and for
comparison the encoding alone and a plain file's write and read of the same bytes, each the mean of
``--repeat`` clients. The store is in a temporary folder (the OS page cache, as in a run).

Then rounds as a run has them (``--clients`` clients a round of ``mnist_2nn``, a tenth of them of
``mnist_cnn``, each loaded and saved once a round, for
``--rounds`` rounds after a first that fills the store), side by side in one process: today's store
and ``PreviousStore``, the store as it was before it wrote each state once (a write-ahead log, SQLite's
own ``secure_delete`` setting, a client's superseded row deleted before its new row is inserted), the
two interleaved round by round. Per client-round: the load and the save (ms), and the bytes the
process wrote and read (``/proc/self/io``'s ``wchar``/``rchar``) as multiples of the state's size.

    .venv/bin/python bench/client_store_io.py [--repeat 20] [--clients 100] [--rounds 4]

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from fedgc.flower.state.disk_store import BUSY_TIMEOUT_MS, CACHE_KIB, DiskStore, StoreError
from fedgc.flower.state.state_bytes import encode_state


class PreviousStore(DiskStore):
    """The disk store as it was before it wrote each state once (fedgc 23f9a8f's ``_connection`` and
    ``save``), for the comparison only: a write-ahead log (each state written into it, read back and
    written into the file), SQLite's own ``secure_delete`` (Debian's build zeroes a deleted row's pages),
    the superseded row deleted before the new one is inserted."""

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._conn.execute("PRAGMA page_size = 65536")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = OFF")
            self._conn.execute("PRAGMA wal_autocheckpoint = 4096")
            self._conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self._pid = os.getpid()
        return self._conn

    def save(self, client: int, generation: int, state) -> None:
        data = encode_state(state)
        client, generation = int(client), int(generation)
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    kept, kept_before = self._kept(conn)
                    rows = [g for (g,) in conn.execute("SELECT generation FROM state WHERE client = ?", (client,))]
                    keep = {max((g for g in rows if g <= k), default=None) for k in (kept, kept_before)}
                    drop = [(client, g) for g in rows if g not in keep and g != generation]
                    conn.executemany("DELETE FROM state WHERE client = ? AND generation = ?", drop)
                    conn.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?, ?)",
                                 (client, generation, self.row_crc(client, generation, data), data))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                self.generation = max(self.generation, generation)
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None


def mean_ms(call, repeat: int) -> float:
    t0 = time.perf_counter()
    for i in range(repeat):
        call(i)
    return 1000 * (time.perf_counter() - t0) / repeat


def measure(params: int, repeat: int, folder: Path) -> dict:
    from fedgc.flower.state.state_bytes import decode_state

    state = dgc_state(params)
    store = DiskStore(folder / f"store-{params}.sqlite")
    data = encode_state(state)

    def write_file(i: int) -> None:
        (folder / f"f{params}-{i}").write_bytes(data)

    result = {
        "params": params, "state_mb": round(len(data) / 1e6, 3),
        "encode_ms": mean_ms(lambda i: encode_state(state), repeat),
        "decode_ms": mean_ms(lambda i: decode_state(data), repeat),
        "save_first_ms": mean_ms(lambda i: store.save(i, 1, state), repeat),
        "save_superseding_ms": mean_ms(lambda i: store.save(i, 2, state), repeat),
        "load_ms": mean_ms(lambda i: store.load(i), repeat),
        "plain_file_write_ms": mean_ms(write_file, repeat),
        "plain_file_read_ms": mean_ms(lambda i: (folder / f"f{params}-{i}").read_bytes(), repeat),
    }
    result = {k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}
    result["save_mb_per_s"] = round(len(data) / 1e3 / result["save_superseding_ms"], 1)
    result["load_mb_per_s"] = round(len(data) / 1e3 / result["load_ms"], 1)
    store.close()
    return result


def dgc_state(params: int):
    """A DGC client's state as the ClientApp stores it: fp32 momentum u and velocity v, dense."""
    import torch
    from flwr.app import RecordDict

    from fedgc.flower.state.client_state import pack_state

    generator = torch.Generator().manual_seed(0)
    return RecordDict({"fedgc.memory": pack_state({"u": torch.randn(params, generator=generator),
                                                   "v": torch.randn(params, generator=generator)})})


def process_io() -> tuple[int, int]:
    """This process's bytes written and read through system calls so far (Linux), else zeros."""
    try:
        fields = dict(line.split(":") for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return 0, 0
    return int(fields["wchar"]), int(fields["rchar"])


def rounds_side_by_side(params: int, clients: int, rounds: int, folder: Path) -> dict:
    """``clients`` clients a round, each loaded then saved, in today's store and in ``PreviousStore``,
    the two interleaved round by round after a first round that fills each."""
    state = dgc_state(params)
    size = len(encode_state(state))
    stores = {"previous": PreviousStore(folder / f"previous-{params}.sqlite"),
              "now": DiskStore(folder / f"now-{params}.sqlite")}
    figures: dict[str, dict[str, list[float]]] = {k: {"load": [], "save": [], "written": [], "read": []} for k in stores}
    for generation in range(1, rounds + 2):
        for name, store in stores.items():
            load = save = 0.0
            wrote, read = process_io()
            for client in range(clients):
                t0 = time.perf_counter()
                store.load(client)
                t1 = time.perf_counter()
                store.save(client, generation, state)
                load, save = load + t1 - t0, save + time.perf_counter() - t1
            wrote_after, read_after = process_io()
            if generation > 1:  # the first round fills the store
                f = figures[name]
                f["load"].append(1000 * load / clients)
                f["save"].append(1000 * save / clients)
                f["written"].append((wrote_after - wrote) / clients / size)
                f["read"].append((read_after - read) / clients / size)
    for store in stores.values():
        store.close()
    result = {"params": params, "clients": clients, "rounds": rounds, "state_mb": round(size / 1e6, 3)}
    for name, f in figures.items():
        result[name] = {"load_ms": round(statistics.median(f["load"]), 2), "save_ms": round(statistics.median(f["save"]), 2),
                        "written_x_state": round(statistics.median(f["written"]), 2),
                        "read_x_state": round(statistics.median(f["read"]), 2)}
    both = {k: result[k]["load_ms"] + result[k]["save_ms"] for k in stores}
    result["previous_over_now"] = round(both["previous"] / both["now"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--clients", type=int, default=100, help="clients a round in the side-by-side rounds")
    parser.add_argument("--rounds", type=int, default=4, help="rounds timed after the first (0: none)")
    args = parser.parse_args()
    if not 1 <= args.repeat <= 10_000 or not 1 <= args.clients <= 10_000 or not 0 <= args.rounds <= 1000:
        parser.error("--repeat and --clients must be 1 to 10000, --rounds 0 to 1000")
    import torch

    torch.set_num_threads(1)
    runs = []
    with tempfile.TemporaryDirectory(prefix="fedgc-store-bench-") as tmp:
        for name, params in (("mnist_2nn", 199_210), ("mnist_cnn", 1_663_370)):
            run = {"model": name, **measure(params, args.repeat, Path(tmp))}
            print(f"{name}: {run['state_mb']} MB a client: save {run['save_superseding_ms']} ms "
                  f"({run['save_mb_per_s']} MB/s), load {run['load_ms']} ms ({run['load_mb_per_s']} MB/s); "
                  f"a plain file: write {run['plain_file_write_ms']} ms, read {run['plain_file_read_ms']} ms",
                  flush=True)
            runs.append(run)
        side_by_side = []
        if args.rounds:
            for name, params, clients in (("mnist_2nn", 199_210, args.clients),
                                          ("mnist_cnn", 1_663_370, max(1, args.clients // 10))):
                r = {"model": name, **rounds_side_by_side(params, clients, args.rounds, Path(tmp))}
                p, n = r["previous"], r["now"]
                print(f"{name}: {clients} clients a round, a client-round: load + save {n['load_ms']} + "
                      f"{n['save_ms']} ms (previous store {p['load_ms']} + {p['save_ms']} ms, x{r['previous_over_now']}); "
                      f"written {n['written_x_state']}x the state (previous {p['written_x_state']}x), read "
                      f"{n['read_x_state']}x (previous {p['read_x_state']}x)", flush=True)
                side_by_side.append(r)
    print(json.dumps({"repeat": args.repeat, "runs": runs, "rounds": side_by_side}))


if __name__ == "__main__":
    main()
