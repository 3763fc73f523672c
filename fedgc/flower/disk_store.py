"""The client-state store on disk: ``DiskStore``, an SQLite file in the run folder (``fedgc.flower.client_store``).

Why SQLite and not memory-mapped files: a round touches ~100 clients out of thousands, each state a
few hundred KB to tens of MB of variable size (sparse pending updates, bf16 momentum...). SQLite
gives keyed random access to variable-size blobs, atomic commits (a run killed mid-write leaves the
last committed state, never a torn one), concurrent writers from Flower's worker processes (WAL and a
busy timeout), and versions by round, which is what a checkpoint needs (below), in one file with
nothing to install. Fixed-size memory-mapped slots would need one slot size per client (states
vary), their own free-space bookkeeping and their own crash consistency; the OS page cache serves
SQLite's reads as it would a map's, and the blobs are read once per turn, so the copy costs little
next to training (docs/performance.md has the measured throughput).

Checkpoints without copying the states: each row is tagged with the round that wrote it (its
generation). A checkpoint (``state_dict``) records the store's id and the newest generation; resuming
(``load_state_dict``) deletes the rows written after it, so every client's latest row is again the
one it had at the checkpoint. A row superseded after the last two checkpoints is deleted when its
client is written again, and older ones at the next checkpoint: a client keeps at most three rows.

Every read is checked: a file that is not this run's store, not an SQLite database, or a row whose
CRC does not match, is a ``StoreError`` with one line.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
import zlib
from pathlib import Path

from flwr.app import RecordDict

from fedgc.flower.client_state import state_records
from fedgc.flower.state_bytes import decode_state, encode_state

STORE_FORMAT = 1
BUSY_TIMEOUT_MS = 120_000


class StoreError(ValueError):
    """The client-state store cannot be used (damaged, not this run's); ``str(err)`` is one line."""


class DamagedState(StoreError):
    """One client's stored state is damaged: that client's turn fails (counted), the run goes on."""


class DiskStore:
    """The states in an SQLite file, one row per client and generation (see the module docstring)."""

    kind = "disk"

    def __init__(self, path: Path, *, fresh: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._pid = -1
        self._conn: sqlite3.Connection | None = None
        self.generation = 0  # newest generation written by this process
        if fresh:
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        try:
            conn = self._connection()
            with conn:
                conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)")
                conn.execute("CREATE TABLE IF NOT EXISTS state (client INTEGER NOT NULL, generation INTEGER NOT NULL, "
                             "crc INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (client, generation))")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (STORE_FORMAT,))
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('id', ?)", (uuid.uuid4().hex,))
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('kept', 0)")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('kept_before', 0)")
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        if meta.get("format") != STORE_FORMAT or not isinstance(meta.get("id"), str):
            raise StoreError(f"{self.path}: not a fedgc client-state store of format {STORE_FORMAT}")
        self.id = meta["id"]

    def _why(self, err: BaseException) -> str:
        return f"client-state store {self.path}: {str(err).splitlines()[0][:160] if str(err) else type(err).__name__}"

    def _connection(self) -> sqlite3.Connection:
        """This process's connection (a forked worker opens its own)."""
        if self._conn is None or self._pid != os.getpid():
            self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._conn.execute("PRAGMA page_size = 65536")  # (a new file's) blobs of ~1 MB: fewer, larger pages
            self._conn.execute("PRAGMA journal_mode = WAL")
            # Consistent whatever happens to the process; made durable at each checkpoint (``state_dict``).
            self._conn.execute("PRAGMA synchronous = OFF")
            self._conn.execute("PRAGMA wal_autocheckpoint = 4096")
            self._pid = os.getpid()
        return self._conn

    def _kept(self, conn: sqlite3.Connection) -> tuple[int, int]:
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('kept', 'kept_before')").fetchall())
        return int(meta.get("kept", 0)), int(meta.get("kept_before", 0))

    def load(self, client: int) -> RecordDict:
        try:
            with self._lock:
                row = self._connection().execute(
                    "SELECT crc, data FROM state WHERE client = ? ORDER BY generation DESC LIMIT 1",
                    (int(client),)).fetchone()
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        if row is None:
            return RecordDict()
        crc, data = row
        if not isinstance(data, bytes) or zlib.crc32(data) != crc:
            raise DamagedState(f"client-state store {self.path}: client {client}'s state is damaged (CRC mismatch)")
        try:
            return decode_state(data)
        except Exception as err:  # noqa: BLE001 — a row that does not parse is damage, whatever the parser says
            raise DamagedState(f"client-state store {self.path}: client {client}'s state does not parse "
                             f"({type(err).__name__})") from None

    def save(self, client: int, generation: int, state: RecordDict) -> None:
        """``state`` as ``client``'s newest, written in round ``generation``; the client's rows that no
        checkpoint needs any longer go."""
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
                                 (client, generation, zlib.crc32(data), data))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                self.generation = max(self.generation, generation)
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None

    def replace(self, client: int, state: RecordDict) -> None:
        """``state`` as ``client``'s only row (a state handed back on resume on Flower's runtimes)."""
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM state WHERE client = ?", (int(client),))
                conn.execute("COMMIT")
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        if len(state):
            self.save(client, 0, state)

    def clients(self) -> list[int]:
        """The clients whose newest row holds anything."""
        try:
            with self._lock:
                rows = self._connection().execute(
                    "SELECT s.client, length(s.data) FROM state s JOIN (SELECT client, MAX(generation) AS g FROM state "
                    "GROUP BY client) n ON s.client = n.client AND s.generation = n.g").fetchall()
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        return sorted(c for c, size in rows if size)

    def nbytes(self) -> int:
        """Bytes of the newest rows (what the clients' states take on disk, before SQLite's pages)."""
        try:
            with self._lock:
                (total,) = self._connection().execute(
                    "SELECT COALESCE(SUM(length(s.data)), 0) FROM state s JOIN (SELECT client, MAX(generation) AS g "
                    "FROM state GROUP BY client) n ON s.client = n.client AND s.generation = n.g").fetchone()
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        return int(total)

    def state_dict(self) -> dict:
        """What a checkpoint holds of the store: its id and newest generation (not the states: they stay
        in the file). Rows older than the previous checkpoint's are deleted."""
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                (newest,) = conn.execute("SELECT COALESCE(MAX(generation), 0) FROM state").fetchone()
                newest = max(int(newest), self.generation)
                kept, _ = self._kept(conn)
                conn.execute("UPDATE meta SET value = ? WHERE key = 'kept_before'", (kept,))
                conn.execute("UPDATE meta SET value = ? WHERE key = 'kept'", (newest,))
                # Rows older than each client's row at the previous checkpoint (``kept``) no checkpoint needs.
                conn.execute("DELETE FROM state WHERE generation < (SELECT MAX(o.generation) FROM state o "
                             "WHERE o.client = state.client AND o.generation <= ?)", (kept,))
                conn.execute("COMMIT")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # into the file, then on the disk: durable
            with open(self.path, "rb+") as f:
                os.fsync(f.fileno())
        except (sqlite3.Error, OSError) as err:
            raise StoreError(self._why(err)) from None
        return {"store": {"kind": "disk", "id": self.id, "generation": newest}}

    def load_state_dict(self, state: dict) -> None:
        """Back to a checkpoint: the store must be the one it was taken with; rows written after it go."""
        saved = state.get("store")
        if saved is None and isinstance(state.get("contexts"), dict):  # a checkpoint holding the states
            self._adopt(state["contexts"])
            return
        if not isinstance(saved, dict) or saved.get("kind") != "disk":
            raise StoreError("the checkpoint's client-state mark is malformed")
        generation = saved.get("generation")
        if type(generation) is not int or generation < 0:
            raise StoreError("the checkpoint's client-state generation is not a count")
        if saved.get("id") != self.id:
            raise StoreError(f"client-state store {self.path} is not the one this checkpoint was taken with")
        try:
            with self._lock:
                conn = self._connection()
                (check,) = conn.execute("PRAGMA quick_check").fetchone()
                if check != "ok":
                    raise StoreError(f"client-state store {self.path} is damaged ({str(check)[:80]})")
                for client, crc, data in conn.execute(  # every row this checkpoint may hand a client
                        "SELECT client, crc, data FROM state WHERE generation <= ?", (generation,)):
                    if not isinstance(data, bytes) or zlib.crc32(data) != crc:
                        raise StoreError(f"client-state store {self.path} is damaged (client {client}'s state "
                                         "does not match its CRC)")
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM state WHERE generation > ?", (generation,))
                conn.execute("UPDATE meta SET value = ? WHERE key IN ('kept', 'kept_before')", (generation,))
                conn.execute("COMMIT")
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        self.generation = generation

    def _adopt(self, contexts: dict) -> None:
        """The states a checkpoint holds itself (one written with the states in memory) as the store's only rows."""
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM state")
                conn.execute("UPDATE meta SET value = 0 WHERE key IN ('kept', 'kept_before')")
                conn.execute("COMMIT")
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        for client, saved in contexts.items():
            self.save(client, 0, state_records(saved))
        self.generation = 0

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None


_OPEN: dict[str, DiskStore] = {}  # per process: the engine's store and its ClientApps' are one object inline


def open_disk_store(path: Path, *, fresh: bool = False) -> DiskStore:
    key = str(Path(path).resolve())
    store = _OPEN.get(key)
    if store is None or fresh:
        if store is not None:
            store.close()
        store = _OPEN[key] = DiskStore(Path(key), fresh=fresh)
    return store


def release_store(path: Path) -> None:
    """Close ``path``'s store in this process (its grid is gone); a holder that still uses it reopens it."""
    store = _OPEN.pop(str(Path(path).resolve()), None)
    if store is not None:
        store.close()


def release_under(folder: Path) -> None:
    """Close every store this process opened inside ``folder``."""
    root = str(Path(folder).resolve())
    for key in [k for k in _OPEN if k.startswith(root)]:
        _OPEN.pop(key).close()
