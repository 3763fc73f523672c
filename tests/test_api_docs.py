"""docs/api.md runs as printed: every fenced ```python block of the page, read from the page itself,
in order, in one namespace (as a reader pasting them into one script would), in an empty temporary
folder with the shared data's environment. A block that must not run says so right above it with
``<!-- not executed: the reason -->``; the test prints how many blocks ran and how many were marked.

Then what the page promises of its own output: the quickstart's run, sweep and table; the reader's own
model, data set, compressors and rule in a sweep over two seeds; no folder left behind."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

import fedgc

pytestmark = pytest.mark.usefixtures("isolated_registries")

REPO = Path(__file__).resolve().parents[1]
PAGES = ("docs/api.md",)
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<code>.*?)^(?P=indent)```[ \t]*$", re.MULTILINE | re.DOTALL)
MARK = re.compile(r"<!--\s*not executed:\s*(?P<reason>\S.*?)\s*-->")


def python_blocks(text: str, page: str = "page") -> list[tuple[int, str, str | None]]:
    """The page's ```python blocks in order: (line, code dedented, the reason it is not executed or None).
    A marker must be the last non-blank line before a python block and give a reason."""
    blocks = []
    marked_lines = {text.count("\n", 0, m.start()) + 1 for m in MARK.finditer(text)}
    used = set()
    for fence in FENCE.finditer(text):
        line = text.count("\n", 0, fence.start()) + 1
        before = text[:fence.start()].rstrip().splitlines()
        mark = MARK.fullmatch(before[-1].strip()) if before else None
        if fence["lang"] != "python":
            continue
        if mark:
            used.add(len(before))
        blocks.append((line, textwrap.dedent(fence["code"]), mark["reason"] if mark else None))
    stray = sorted(marked_lines - used)
    assert not stray, f"{page}: line {stray[0]}: a 'not executed' marker not right above a ```python block"
    assert "not executed" not in MARK.sub("", text), f"{page}: a 'not executed' marker without a reason"
    return blocks


def test_blocks_are_read_in_order_and_a_marked_one_is_not_run():
    page = textwrap.dedent("""\
        # A page
        ```python
        a = 1
        ```
        <!-- not executed: needs a GPU -->

        ```python
        raise SystemExit
        ```
        ```toml
        x = 1
        ```
        1. a list
           ```python
           b = a + 1
           ```
        """)
    assert python_blocks(page) == [(2, "a = 1\n", None), (7, "raise SystemExit\n", "needs a GPU"),
                                   (14, "b = a + 1\n", None)]
    with pytest.raises(AssertionError, match="line 1: a 'not executed' marker not right above"):
        python_blocks("<!-- not executed: stray -->\ntext\n```python\na = 1\n```\n")
    with pytest.raises(AssertionError, match="without a reason"):
        python_blocks("<!-- not executed: -->\n```python\na = 1\n```\n")


def run_page(page: str, capsys) -> tuple[dict, str]:
    """Execute ``page``'s python blocks in one namespace; (the namespace, what they printed)."""
    blocks = python_blocks((REPO / page).read_text(), page)
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    for line, code, skipped in blocks:
        if skipped is None:
            exec(compile(code, f"{page}, the block at line {line}", "exec"), namespace)  # noqa: S102 — the page's code
            ran += 1
    printed = capsys.readouterr().out
    with capsys.disabled():
        print(f"\n{page}: {ran} python blocks ran, {len(blocks) - ran} marked not executed")
    assert ran >= 1 and blocks[0][2] is None, f"{page}: its first block must run"
    return namespace, printed


def table_rows(printed: str, first: str) -> list[dict[str, str]]:
    """The rows of the printed Markdown table whose header starts with ``first``, as {column: cell}."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first} |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        rows.append(dict(zip(header, [c.strip() for c in line.strip("|").split("|")])))
    return rows


def test_every_python_block_of_docs_api_md_runs_and_prints_what_the_page_says(tmp_path, monkeypatch, capsys):
    shared = Path(os.environ.get("FEDGC_SHARED_DIR", REPO.parent / "shared"))
    monkeypatch.setenv("FEDGC_SHARED_DIR", str(shared))
    monkeypatch.setenv("FEDGC_DATA_DIR", os.environ.get("FEDGC_DATA_DIR", str(shared / "data")))
    monkeypatch.setenv("FEDGC_TRACE_DIR", os.environ.get("FEDGC_TRACE_DIR", str(shared / "traces")))
    monkeypatch.chdir(tmp_path)
    ns, printed = run_page("docs/api.md", capsys)

    # The first block: the built-in quickstart, 10 rounds in memory, then a sweep of 2 densities × 2 seeds.
    assert ns["run"].out_dir is None and ns["run"].summary.rounds == 10 and len(ns["df"]) == 10
    assert [(r.scenario.compression.density, r.scenario.seed) for r in ns["sweep"].runs] == \
        [(0.01, 0), (0.01, 1), (0.001, 0), (0.001, 1)]  # plan order: the seed varies fastest
    rows = table_rows(printed, "run")
    assert [(r["run"], r["n"], r["rounds"]) for r in rows[:2]] == \
        [("compression.density=0.01", "2", "10"), ("compression.density=0.001", "2", "10")]
    assert all("±" in r["final acc"] for r in rows[:2])

    # "Together": the reader's model, data, compressor and rule, two seeds; then the sign_scale run.
    (mine,) = table_rows(printed[printed.rindex("| run | compressor"):], "run")  # the page's last table
    assert (mine["run"], mine["compressor"], mine["n"], mine["rounds"]) == ("mine", "half_topk", "2", "3"), mine
    assert "±" in mine["final acc"] and 1.0 < float(mine["compression ratio"].rstrip("×")) < 2.0
    assert printed.rstrip().splitlines()[-1] == "12 0"  # the page's comment: 4 clients × 3 rounds, none failed
    with pytest.raises(fedgc.ScenarioError, match="scale"):
        ns["mine"].with_overrides({"compression": {"name": "sign_scale", "scale": "big"}})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blobs.npz"]  # the page's own file; no run folders
