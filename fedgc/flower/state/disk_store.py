"""The client-state store on disk: ``DiskStore``, an SQLite file in the run folder (``fedgc.flower.state.client_store``).

Why SQLite and not memory-mapped files: a round touches ~100 clients out of thousands, each state a
few hundred KB to tens of MB of variable size (sparse pending updates, bf16 momentum...). SQLite
gives keyed random access to variable-size blobs, atomic commits (a run killed mid-write leaves the
last committed state, never a torn one: a rollback journal), concurrent writers from Flower's worker
processes (file locks and a busy timeout), and versions by round, which is what a checkpoint needs
(below), in one file with nothing to install. Fixed-size memory-mapped slots would need one slot size
per client (states vary), their own free-space bookkeeping and their own crash consistency; the OS
page cache serves SQLite's reads as it would a map's, and the blobs are read once per turn.

Each state is written once: into pages freed by earlier commits (the new row before the rows it
supersedes are deleted, deleted pages not zeroed), which the rollback journal need not save, so a save
writes the state's bytes plus the few pages a commit changes in place, twice (journal, then file):
about 1.6x a 1.6 MB state with 64 KiB pages, where a write-ahead log wrote it into the log, read it
back and wrote it into the file (2.3x written, 1x read; docs/performance.md has the measured times).

Checkpoints without copying the states: each row is tagged with the round that wrote it (its
generation). A checkpoint (``state_dict``) records the store's id, the newest generation and, for
every client, the generation and CRC of its newest row; resuming (``load_state_dict``) checks that
each client's newest row up to the checkpoint's generation is that one, then deletes the rows written
after it, so every client's latest row is again the one it had at the checkpoint. A row superseded
after the last two checkpoints is deleted when its client is written again, and older ones at the
next checkpoint: a client keeps at most three rows.

A row is bound to its place: its CRC-32 is seeded with the store's id, the client and the generation
(``row_crc``), so a row swapped or copied to another client, moved to another generation or brought
from another store does not match its CRC, and one deleted (also the row at the checkpoint's
generation, which would silently hand its client an older state) or moved past the checkpoint no
longer matches the checkpoint's record. The binding costs nothing per turn (the CRC was computed
anyway); the checkpoint's record is 24 bytes a client, read from an index without touching the states.
A checkpoint written before the binding (no ``rows``), or a store of format 1 (unbound CRCs), cannot
be verified and is refused in one line: such a run is started again, not resumed. The binding is
against mix-ups, not forgery: CRC-32 is no secret, so whoever rewrites rows, their CRCs and the
checkpoint's record consistently is not detected.

Every read is checked: a file that is not this run's store, not an SQLite database, or a row whose
CRC does not match, is a ``StoreError`` with one line naming the store's file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from pathlib import Path

import torch
from flwr.app import RecordDict

from fedgc.core.checkpoint import StateFileError
from fedgc.flower.state.client_state import state_records
from fedgc.flower.state.state_bytes import decode_state, encode_state

try:  # zlib-ng's CRC-32: zlib's values (the same polynomial and seeds), carry-less multiplication, ~13x faster
    from zlib_ng.zlib_ng import crc32
except ImportError:  # an environment without it: zlib's own, the same values
    from zlib import crc32

# 1: a row's CRC over its bytes alone; 2: seeded with the store's id, client and generation (``row_crc``).
STORE_FORMAT = 2
BUSY_TIMEOUT_MS = 120_000
CACHE_KIB = 64 * 1024  # SQLite's page cache per connection
SIDE_FILES = ("", "-journal", "-wal", "-shm")  # the store and the files SQLite keeps beside it


class StoreError(StateFileError):
    """The client-state store cannot be used (damaged, not this run's, not the checkpoint's rows);
    ``str(err)`` is one line naming the store's file."""


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
            for suffix in SIDE_FILES:
                Path(str(self.path) + suffix).unlink(missing_ok=True)  # (a link itself, never what it names)
        for suffix in SIDE_FILES:  # SQLite opens these by name and follows links: the journal it truncates
            if Path(str(self.path) + suffix).is_symlink():
                raise StoreError(f"client-state store {self.path}{suffix} is a link; nothing was written through it")
        try:
            conn = self._connection()
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)")
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (STORE_FORMAT,))
            (stored_format,) = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if stored_format == 1:  # before rows were bound: nothing here can tell a swapped row (not changed)
                raise StoreError(f"client-state store {self.path} has format 1, written by a fedgc whose checkpoints "
                                 "predate binding the store's rows to them: it cannot be verified, so it is not "
                                 "resumed (start the run again)")
            if stored_format == STORE_FORMAT:
                conn.execute("CREATE TABLE IF NOT EXISTS state (client INTEGER NOT NULL, generation INTEGER NOT "
                             "NULL, crc INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (client, generation))")
                # What a checkpoint records of every client (``rows``), read without touching the states.
                conn.execute("CREATE INDEX IF NOT EXISTS state_mark ON state (client, generation, crc)")
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
            # A rollback journal, not a write-ahead log: a state is written once, into pages that no row
            # uses (``save``), and the journal holds only the few pages a commit changes in place (the
            # tables' leaves, the free list). Under WAL every state went into the log, was read back
            # and went again into the file. A store a WAL-mode fedgc left (format 2 as well) becomes
            # one at its first connection, its log folded into the file (were another connection
            # holding it in WAL mode, it would stay in WAL mode: consistent either way).
            try:
                self._conn.execute("PRAGMA journal_mode = TRUNCATE")
            except sqlite3.OperationalError:
                pass
            # A deleted row's pages are left as they are, free for the next state (SQLite built with
            # SECURE_DELETE, as Debian's is, would zero them: a second write of every state).
            self._conn.execute("PRAGMA secure_delete = OFF")
            # Consistent whatever happens to the process; made durable at each checkpoint (``state_dict``).
            self._conn.execute("PRAGMA synchronous = OFF")
            self._conn.execute("PRAGMA wal_autocheckpoint = 4096")  # (only while in WAL mode, above)
            # A page cache of 64 MiB (the default is 2 MiB: 31 pages of 64 KiB, less than two states of a
            # 200,000-parameter model): a transaction's pages stay in memory until its commit writes them.
            self._conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self._pid = os.getpid()
        return self._conn

    def row_crc(self, client: int, generation: int, data: bytes) -> int:
        """The CRC-32 of ``client``'s row of round ``generation`` holding ``data``: seeded with the
        store's id, the client and the generation, so the row matches it only in its own place."""
        return crc32(data, crc32(f"fedgc-state-row {self.id} {int(client)} {int(generation)}\n".encode()))

    def _kept(self, conn: sqlite3.Connection) -> tuple[int, int]:
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('kept', 'kept_before')").fetchall())
        return int(meta.get("kept", 0)), int(meta.get("kept_before", 0))

    def load(self, client: int) -> RecordDict:
        try:
            with self._lock:
                row = self._connection().execute(
                    "SELECT generation, crc, data FROM state WHERE client = ? ORDER BY generation DESC LIMIT 1",
                    (int(client),)).fetchone()
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        if row is None:
            return RecordDict()
        generation, crc, data = row
        if not isinstance(data, bytes) or type(generation) is not int or self.row_crc(client, generation, data) != crc:
            raise DamagedState(f"client-state store {self.path}: client {client}'s state is damaged (CRC mismatch: "
                               "changed, or not written for this client, round and store)")
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
                    # The new row first: its pages come from rows deleted by earlier commits, so the
                    # journal need not keep their content (pages freed in this transaction would be
                    # copied to it before being reused: the state written twice).
                    conn.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?, ?)",
                                 (client, generation, self.row_crc(client, generation, data), data))
                    conn.executemany("DELETE FROM state WHERE client = ? AND generation = ?", drop)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # (SQLite rolls back itself on a full disk: its error is the one told)
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
        """What a checkpoint holds of the store (not the states: they stay in the file): its id, newest
        generation and ``rows``, every client's newest row as ``[client, generation, crc]`` (an int64
        tensor, by client). Rows older than the previous checkpoint's are deleted."""
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
                # SQLite takes a bare column (crc) from the row holding the MAX (a covering index scan).
                rows = conn.execute("SELECT client, MAX(generation), crc FROM state GROUP BY client "
                                    "ORDER BY client").fetchall()
                conn.execute("COMMIT")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # (a store still in WAL mode: its log into the file)
            with open(self.path, "rb+") as f:
                os.fsync(f.fileno())
        except (sqlite3.Error, OSError) as err:
            raise StoreError(self._why(err)) from None
        marks = torch.tensor(rows, dtype=torch.int64) if rows else torch.zeros((0, 3), dtype=torch.int64)
        return {"store": {"kind": "disk", "id": self.id, "generation": newest, "rows": marks}}

    def load_state_dict(self, state: dict) -> None:
        """Back to a checkpoint: the store must be the one it was taken with, and every client's newest
        row up to it the one it recorded (``rows``); rows written after it go."""
        saved = state.get("store")
        if saved is None and isinstance(state.get("contexts"), dict):  # a checkpoint holding the states
            self._adopt(state["contexts"])
            return
        generation = self.check_mark(state)
        try:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM state WHERE generation > ?", (generation,))
                conn.execute("UPDATE meta SET value = ? WHERE key IN ('kept', 'kept_before')", (generation,))
                conn.execute("COMMIT")
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        self.generation = generation

    def check_mark(self, state: dict) -> int:
        """The checkpoint's generation, once the store is the one ``state`` (the checkpoint's transport
        part) was taken with and holds the rows it recorded; changes nothing. A ``StoreError`` names the
        store; a ``ValueError`` the checkpoint (its mark is malformed)."""
        saved = state.get("store")
        # (A plain ValueError: the checkpoint itself is malformed, and the error names it.)
        if not isinstance(saved, dict) or saved.get("kind") != "disk":
            raise ValueError("the checkpoint's client-state mark is malformed")
        generation = saved.get("generation")
        if type(generation) is not int or generation < 0:
            raise ValueError("the checkpoint's client-state generation is not a count")
        if saved.get("id") != self.id:
            raise StoreError(f"client-state store {self.path} is not the one this checkpoint was taken with")
        if "rows" not in saved:
            raise StoreError(f"client-state store {self.path}: the checkpoint predates binding the store's rows to "
                             "it (it records no client's row), so they cannot be verified and it is not resumed "
                             "(start the run again)")
        marks = _marks(saved["rows"], generation)
        try:
            with self._lock:
                conn = self._connection()
                (check,) = conn.execute("PRAGMA quick_check").fetchone()
                if check != "ok":
                    raise StoreError(f"client-state store {self.path} is damaged ({str(check)[:80]})")
                self._check_rows(conn, generation, marks)
        except sqlite3.Error as err:
            raise StoreError(self._why(err)) from None
        return generation

    def _check_rows(self, conn: sqlite3.Connection, generation: int, marks: list[tuple[int, int, int]]) -> None:
        """Every row up to ``generation`` (those a resume may hand out) matches its CRC, and every client's
        newest one is the row the checkpoint recorded (``marks``, by client); else one line naming the client."""
        where = f"client-state store {self.path}"
        for client, at, crc, data in conn.execute(  # in the file's order, one row in memory at a time
                "SELECT client, generation, crc, data FROM state WHERE generation <= ?", (generation,)):
            if (not isinstance(data, bytes) or type(client) is not int or type(at) is not int
                    or self.row_crc(client, at, data) != crc):
                raise StoreError(f"{where} is damaged: client {client}'s row of round {at} does not match its CRC "
                                 "(changed, or swapped or copied from another client, round or store)")
        expected = iter(marks)
        want = next(expected, None)
        for client, at, crc in conn.execute(  # from the index state_mark, by client: the states are not read
                "SELECT client, MAX(generation), crc FROM state WHERE generation <= ? GROUP BY client ORDER BY client",
                (generation,)):
            if want is not None and want[0] < client:
                break  # ``want``'s client has no row (below)
            if want is None or want[0] > client:
                raise StoreError(f"{where}: client {client} has a row of round {at} the checkpoint did not record "
                                 "(copied or moved in after it)")
            if want[1] != at:
                raise StoreError(f"{where}: client {client}'s newest row up to round {generation} is of round {at}, "
                                 f"the checkpoint recorded round {want[1]} (a row deleted, or moved)")
            if want[2] != crc:
                raise StoreError(f"{where}: client {client}'s row of round {at} is not the one the checkpoint "
                                 "recorded (rewritten after it)")
            want = next(expected, None)
        if want is not None:
            raise StoreError(f"{where}: client {want[0]}'s row of round {want[1]}, which the checkpoint recorded, "
                             f"is missing (deleted, or moved past round {generation})")

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


def _marks(rows: object, generation: int) -> list[tuple[int, int, int]]:
    """A checkpoint's ``rows`` as ``(client, generation, crc)`` by client, once they are well formed (an
    int64 tensor ``[n, 3]``, clients increasing, generations up to the checkpoint's, 32-bit CRCs)."""
    if (not isinstance(rows, torch.Tensor) or rows.dtype != torch.int64 or rows.ndim != 2 or rows.shape[1] != 3
            or rows.layout != torch.strided):
        raise ValueError("the checkpoint's client-state rows are malformed")
    clients, generations, crcs = rows[:, 0], rows[:, 1], rows[:, 2]
    if (bool((clients[1:] <= clients[:-1]).any()) or bool((generations < 0).any())
            or bool((generations > generation).any()) or bool((crcs < 0).any()) or bool((crcs >= 2**32).any())):
        raise ValueError("the checkpoint's client-state rows are malformed")
    return [tuple(r) for r in rows.tolist()]


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
