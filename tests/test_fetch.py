"""``fedgc fetch``: offline from a ``file://`` copy of the shared folder, laid out as the data directory.

The mirror is the shared folder itself (symlinks: mnist/, leaf-shakespeare/, traces/), so every
downloaded file is checked against the SHA-256 recorded in fedgc/fetch/files.tsv, and then compared
byte for byte with the shared copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedgc.fetch import main
from fedgc.fetch.catalog import load_entries
from fedgc.scenario.model import load_tree
from fedgc.scenario.paths import user_cache_dir
from tests.conftest import REPO, get_shared, shared_dir

FEDGC = Path(sys.executable).with_name("fedgc")
OFFICIAL_FASHION_MD5 = {  # zalandoresearch/fashion-mnist README.md, "Get the Data"
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}


def make_mirror(root: Path) -> Path:
    """A mirror laid out like the data directory, pointing at the shared folder (skip if there is none)."""
    shared = shared_dir()
    if not (shared / "traces").is_dir() or not (shared / "data" / "mnist").is_dir():
        pytest.skip(get_shared(shared, "mnist shakespeare traces"))
    root.mkdir(parents=True)
    for name, target in (("mnist", shared / "data" / "mnist"), ("leaf-shakespeare", shared / "data" / "leaf-shakespeare"),
                         ("traces", shared / "traces")):
        (root / name).symlink_to(target.resolve(), target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> Path:
    return make_mirror(tmp_path_factory.mktemp("fetch") / "mirror")


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def fetch_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(FEDGC), "fetch", *args], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **(env or {})})


def test_fetch_from_a_file_mirror_is_checked_and_idempotent(mirror, tmp_path, capsys):
    data = tmp_path / "data"
    assert main(["traces", "mnist", "shakespeare", "--dir", str(data), "--mirror", mirror.as_uri()]) == 0
    out = capsys.readouterr().out
    assert "traces: 341 downloaded, 0 already there" in out and "GPL-3.0-or-later" in out and "Cite:" in out
    assert "mnist: 4 downloaded" in out and "shakespeare: 2 downloaded" in out
    entries = [e for e in load_entries() if e.item != "fashion-mnist"]
    assert files_under(data) == sorted(data / e.path for e in entries)  # exactly the listed files, no leftovers
    shared = shared_dir()
    for entry in entries:
        original = shared / ("traces" if entry.path.startswith("traces/") else "data") / entry.path.removeprefix("traces/")
        assert (data / entry.path).read_bytes() == original.read_bytes(), entry.path  # incl. the derived FedScale CSV
    # Second call: nothing is downloaded (the mirror is gone, yet it succeeds).
    assert main(["traces", "mnist", "--dir", str(data), "--mirror", (tmp_path / "gone").as_uri()]) == 0
    assert "traces: 0 downloaded, 341 already there" in capsys.readouterr().out


def test_checksum_mismatch_is_a_one_line_error_and_leaves_nothing_behind(mirror, tmp_path):
    bad = tmp_path / "bad"
    (bad / "mnist").mkdir(parents=True)
    for f in (mirror / "mnist").glob("*.gz"):
        (bad / "mnist" / f.name).symlink_to(f.resolve())
    broken = bad / "mnist" / "t10k-labels-idx1-ubyte.gz"
    broken.unlink()
    good = (mirror / "mnist" / "t10k-labels-idx1-ubyte.gz").read_bytes()
    broken.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:])  # one bit flipped
    data = tmp_path / "data"
    proc = fetch_cli("mnist", "--dir", str(data), "--mirror", bad.as_uri())
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "sha256 mismatch" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("fedgc fetch: error: mnist/t10k-labels-idx1-ubyte.gz:")
    assert not (data / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()
    assert [p.name for p in files_under(data) if p.name.startswith(".")] == []  # no temporary files
    # Only verified files stayed; a good mirror now completes the set with one download.
    assert len(files_under(data)) == 3
    proc = fetch_cli("mnist", "--dir", str(data), "--mirror", mirror.as_uri())
    assert proc.returncode == 0 and "mnist: 1 downloaded, 3 already there" in proc.stdout, proc.stderr


def test_a_failed_item_leaves_no_folders_or_files(tmp_path):
    data, empty = tmp_path / "data", tmp_path / "empty"
    empty.mkdir()
    proc = fetch_cli("shakespeare", "--dir", str(data), env={"FEDGC_FETCH_MIRROR": empty.as_uri()})
    error, *advice = proc.stderr.splitlines()
    assert proc.returncode == 2 and "nothing written" in error and "Traceback" not in proc.stderr
    assert list(data.iterdir()) == []
    # The source could not be read: how to use a mirror or copy the files by hand (issue 27).
    assert "check the mirror" in advice[0] and f"copy the files by hand into {data}/" in advice[1]


def test_without_a_network_fetch_says_how_to_use_a_mirror_or_copy_by_hand(tmp_path, monkeypatch, capsys):
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    monkeypatch.delenv("FEDGC_FETCH_MIRROR", raising=False)
    assert main(["mnist", "--dir", str(tmp_path / "data")]) == 2
    error, *advice = capsys.readouterr().err.splitlines()
    assert error.startswith("fedgc fetch: error: mnist/") and "name resolution" in error
    assert "no network? fetch from a mirror" in advice[0] and "--mirror file:///" in advice[0]
    assert "fedgc/fetch/files.tsv" in advice[1] and "docs/data.md" in advice[1]


def test_a_corrupted_local_file_is_downloaded_again(mirror, tmp_path, capsys):
    data = tmp_path / "data"
    (data / "mnist").mkdir(parents=True)
    (data / "mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"not mnist")
    assert main(["mnist", "--dir", str(data), "--mirror", mirror.as_uri()]) == 0
    assert "mnist: 4 downloaded" in capsys.readouterr().out
    labels = Path("mnist") / "t10k-labels-idx1-ubyte.gz"
    assert (data / labels).read_bytes() == (mirror / labels).read_bytes()


def test_fashion_mnist_is_checked_against_the_published_md5s(tmp_path):
    entries = [e for e in load_entries() if e.item == "fashion-mnist"]
    assert {e.path.split("/")[-1]: (e.algorithm, e.digest) for e in entries} == {
        name: ("md5", md5) for name, md5 in OFFICIAL_FASHION_MD5.items()}
    assert all(e.urls[0].startswith("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/") for e in entries)
    fake = tmp_path / "fake" / "fashion_mnist"
    fake.mkdir(parents=True)
    for name in OFFICIAL_FASHION_MD5:
        (fake / name).write_bytes(b"x" * 100)
    proc = fetch_cli("fashion-mnist", "--dir", str(tmp_path / "data"), "--mirror", fake.parent.as_uri())
    assert proc.returncode == 2 and "md5 mismatch" in proc.stderr and proc.stderr.count("\n") == 1
    assert files_under(tmp_path / "data") == []


def test_every_shared_trace_file_is_listed_with_its_sha256():
    shared = shared_dir() / "traces"
    if not shared.is_dir():
        pytest.skip(get_shared(shared, "traces"))
    listed = {e.path: e for e in load_entries() if e.item == "traces"}
    on_disk = {"traces/" + p.relative_to(shared).as_posix(): p for p in shared.rglob("*")
               if p.is_file() and p.name != "PROVENANCE.md"}
    assert sorted(listed) == sorted(on_disk)
    for path, entry in listed.items():
        assert entry.digest == hashlib.sha256(on_disk[path].read_bytes()).hexdigest(), path


def test_without_dir_it_fills_the_user_cache_where_the_bundled_scenarios_find_it(mirror, tmp_path, monkeypatch):
    for name in ("FEDGC_DATA_DIR", "FEDGC_TRACE_DIR", "FEDGC_SHARED_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert user_cache_dir() == tmp_path / "cache" / "fedgc"
    assert main(["mnist", "--mirror", mirror.as_uri()]) == 0
    assert len(files_under(tmp_path / "cache" / "fedgc" / "mnist")) == 4
    tree = load_tree(REPO / "scenarios" / "fedavg_mnist_cnn.yaml")
    assert tree["data"]["root"] == str(tmp_path / "cache" / "fedgc" / "mnist")


def test_user_cache_dir_per_platform(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert user_cache_dir() == Path.home() / "Library" / "Caches" / "fedgc"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path))
    assert user_cache_dir() == tmp_path / "fedgc" / "Cache"
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert user_cache_dir() == Path.home() / ".cache" / "fedgc"


def test_console_script_is_installed():
    assert FEDGC.is_file() or shutil.which("fedgc"), f"{FEDGC} missing: reinstall with pip install -e ."
