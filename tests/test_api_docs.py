"""docs/api.md runs as printed: every fenced ```python block of the page, read from the page itself,
in order, in one namespace (as a reader pasting them into one script would), in an empty temporary
folder with the shared data's environment. The page's conventions, each right above or after a block:

- ``<!-- not executed: the reason -->`` above a python block: it is not run; the test prints how many
  blocks ran and how many were marked.
- ``<!-- file: NAME.py -->`` above a python block: a file the reader saves as ``NAME.py`` in the
  working folder (a module of their own, a script), written there, not run in the namespace.
- A ```text block right after a python block: what that block prints, exactly.
- A ```console block: each ``$ python ...`` line runs in a fresh interpreter in the working folder
  (where a case needs a new process: a sweep's workers, a reader without the plugins), after the
  blocks above it; the lines after it, up to the next ``$``, are its standard output, exactly.

Then what the page promises of its own output: the quickstart's run, sweep and table; the reader's own
model, data set, compressors and rule in a sweep over two seeds; a typo in a plugin's option and a
compressor without ``compress`` refused in one line; a sweep with ``jobs=2`` over the reader's own
module; a run read back in a new process; no folder left behind but the page's own."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import fedgc

pytestmark = pytest.mark.usefixtures("isolated_registries")

REPO = Path(__file__).resolve().parents[1]
PAGES = ("docs/api.md",)
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<code>.*?)^(?P=indent)```[ \t]*$", re.MULTILINE | re.DOTALL)
MARK = re.compile(r"<!--\s*not executed:\s*(?P<reason>\S.*?)\s*-->")
FILE = re.compile(r"<!--\s*file:\s*(?P<name>[A-Za-z_]\w*\.py)\s*-->")


@dataclass
class Block:
    """A block the test acts on: ``python`` (run, or skipped with ``skip`` its reason, or saved as
    ``file``; ``output``, the ```text block right after it) or ``console`` (``commands``: each
    ``$ python ...`` line's arguments and the standard output shown under it)."""

    line: int
    lang: str
    code: str
    skip: str | None = None
    file: str | None = None
    output: str | None = None
    commands: tuple[tuple[tuple[str, ...], str], ...] = ()


def console_commands(code: str, where: str) -> tuple[tuple[tuple[str, ...], str], ...]:
    """A ```console block's ``$ python ...`` commands, each with the lines shown under it."""
    commands: list[tuple[tuple[str, ...], list[str]]] = []
    for row in code.splitlines():
        if row.startswith("$ "):
            argv = tuple(shlex.split(row[2:]))
            assert argv[:1] == ("python",), f"{where}: a console command that is not `python ...`: {row!r}"
            commands.append((argv[1:], []))
        else:
            assert commands, f"{where}: output before the first `$ ` command"
            commands[-1][1].append(row)
    return tuple((argv, "".join(f"{row}\n" for row in shown)) for argv, shown in commands)


def page_blocks(text: str, page: str = "page") -> list[Block]:
    """The page's ```python and ```console blocks in order. A marker must be the last non-blank line before
    a python block; a ```text block right after a python block is its output (other ```text blocks are
    prose)."""
    blocks: list[Block] = []
    previous_line = 0  # the line of the fence before this one
    marked_lines = {text.count("\n", 0, m.start()) + 1 for m in (*MARK.finditer(text), *FILE.finditer(text))}
    used = set()
    previous_end = -1
    for fence in FENCE.finditer(text):
        line = text.count("\n", 0, fence.start()) + 1
        before = text[:fence.start()].rstrip().splitlines()
        mark = MARK.fullmatch(before[-1].strip()) if before else None
        file = FILE.fullmatch(before[-1].strip()) if before else None
        right_after = previous_end >= 0 and not text[previous_end:fence.start()].strip()
        previous_end = fence.end()
        runs = blocks and blocks[-1].lang == "python" and blocks[-1].skip is None and blocks[-1].file is None
        if fence["lang"] == "text" and right_after and runs and blocks[-1].line == previous_line:
            blocks[-1].output = textwrap.dedent(fence["code"])
        elif fence["lang"] == "console":
            blocks.append(Block(line, "console", fence["code"],
                                commands=console_commands(textwrap.dedent(fence["code"]), f"{page}: line {line}")))
        elif fence["lang"] == "python":
            if mark or file:
                used.add(len(before))
            blocks.append(Block(line, "python", textwrap.dedent(fence["code"]), skip=mark["reason"] if mark else None,
                                file=file["name"] if file else None))
        previous_line = line
    stray = sorted(marked_lines - used)
    assert not stray, f"{page}: line {stray[0]}: a 'not executed' or 'file' marker not right above a ```python block"
    assert "not executed" not in MARK.sub("", text), f"{page}: a 'not executed' marker without a reason"
    assert "<!-- file:" not in FILE.sub("", text), f"{page}: a 'file' marker without a NAME.py"
    return blocks


def python_blocks(text: str, page: str = "page") -> list[tuple[int, str, str | None]]:
    """The page's ```python blocks run in the namespace or skipped: (line, code, the reason it is not
    executed or None)."""
    return [(b.line, b.code, b.skip) for b in page_blocks(text, page) if b.lang == "python" and b.file is None]


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
    with pytest.raises(AssertionError, match="line 1: a 'not executed' or 'file' marker not right above"):
        python_blocks("<!-- not executed: stray -->\ntext\n```python\na = 1\n```\n")
    with pytest.raises(AssertionError, match="without a reason"):
        python_blocks("<!-- not executed: -->\n```python\na = 1\n```\n")


def test_a_file_block_is_saved_a_text_block_is_its_python_block_s_output_and_console_lines_are_commands():
    page = textwrap.dedent("""\
        ```python
        print(1)
        ```
        ```text
        1
        ```
        <!-- file: mod.py -->
        ```python
        X = 2
        ```
        ```text
        prose, not an output: its block is a file
        ```
        ```console
        $ python -c "import mod; print(mod.X)"
        2
        $ python script.py a
        ```
        """)
    blocks = page_blocks(page)
    assert [(b.line, b.lang, b.file, b.output) for b in blocks] == \
        [(1, "python", None, "1\n"), (8, "python", "mod.py", None), (14, "console", None, None)]
    assert blocks[2].commands == ((("-c", "import mod; print(mod.X)"), "2\n"), (("script.py", "a"), ""))
    assert python_blocks(page) == [(1, "print(1)\n", None)]  # a file is not run in the namespace
    with pytest.raises(AssertionError, match="line 1: a console command that is not `python"):
        page_blocks("```console\n$ rm -rf x\n```\n")
    with pytest.raises(AssertionError, match=r"without a NAME\.py"):
        page_blocks("<!-- file: mod -->\n```python\nX = 2\n```\n")


def run_page(page: str, capsys, folder: Path) -> tuple[dict, str, dict[str, str]]:
    """Execute ``page``'s python blocks in one namespace, save its files in ``folder`` (the current
    directory) and run its console commands there, in page order; (the namespace, what the blocks
    printed, each command's output by its command line). A block's or command's output shown on the page
    must be what it printed."""
    blocks = page_blocks((REPO / page).read_text(), page)
    namespace: dict = {"__name__": "__main__"}
    ran = skipped = files = 0
    printed, commands = "", {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    for block in blocks:
        where = f"{page}, the block at line {block.line}"
        if block.skip is not None:
            skipped += 1
        elif block.file is not None:
            (folder / block.file).write_text(block.code)
            files += 1
        elif block.lang == "python":
            exec(compile(block.code, where, "exec"), namespace)  # noqa: S102 — the page's code
            ran += 1
            out = capsys.readouterr().out
            printed += out
            if block.output is not None:
                assert out == block.output, f"{where} printed {out!r}, the page shows {block.output!r}"
        else:
            for argv, shown in block.commands:
                done = subprocess.run([sys.executable, *argv], cwd=folder, env=env, capture_output=True, text=True,
                                      timeout=300, check=False)
                line = shlex.join(("python", *argv))
                assert done.returncode == 0, f"{where}: `{line}` exited {done.returncode}: {done.stderr[-3000:]}"
                assert done.stdout == shown, f"{where}: `{line}` printed {done.stdout!r}, the page shows {shown!r}"
                commands[line] = done.stdout
    printed += capsys.readouterr().out
    with capsys.disabled():
        print(f"\n{page}: {ran} python blocks ran, {skipped} marked not executed, {files} saved as files, "
              f"{len(commands)} commands run")
    first = next(b for b in blocks if b.lang == "python")
    assert ran >= 1 and first.skip is None and first.file is None, f"{page}: its first block must run"
    return namespace, printed, commands


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
    ns, printed, commands = run_page("docs/api.md", capsys, tmp_path)

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

    # A typo in a plain BaseModel's option and a compressor without compress(): refused, one line each.
    assert "model: options.hiden: unknown key (did you mean `hidden`?) (model my_net)\n" in printed
    assert "compressor 'forgetful': Forgetful does not implement compress (" in printed
    assert ("compressor", "forgetful") not in {(p.kind, p.name) for p in fedgc.registered()}

    # In other processes: a sweep with jobs=2 over the reader's own module, every client of both seeds
    # trained; the signed run read back where none of its plugins is registered, its model refused.
    assert commands["python sweep_jobs.py"] == "[(4, 0), (4, 0)]\n"
    read = commands["python read_back.py"].splitlines()
    assert read[0].startswith("12 (") and "'model my_net'" in read[0] and "'compressor sign_scale'" in read[0]
    assert read[1].startswith("model 'my_net': the run was made with it registered in another process") and \
        len(read) == 2
    assert ns["signed"].out_dir == Path("signed")  # as given: relative to the current folder
    # The page's own files and the one folder it asked for; the sweeps in memory left nothing.
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["blobs.npz", "my_plugins.py", "read_back.py", "signed", "sweep_jobs.py"]
