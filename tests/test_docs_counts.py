"""The docs count what exists and name commands that are there: as many notebooks as ``notebooks/``
holds, each in the docs' table, and every ``jupyter COMMAND`` they show installed beside this Python
(``make test`` installs nbclient's ``jupyter execute``; ``nbconvert`` is not a dependency)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.conftest import REPO

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))


def _counted(word: str) -> int:
    return NUMBERS[word.lower()] if word.lower() in NUMBERS else int(word)


def test_the_docs_count_the_notebooks_there_are():
    said = [(doc.name, m.group(0)) for doc in DOCS for m in re.finditer(
        r"\b(\w+) (?:small )?notebooks\b|\ball (\w+) with one round", doc.read_text())
        if (m.group(1) or m.group(2) or "").lower() in NUMBERS or (m.group(1) or m.group(2) or "").isdigit()]
    assert said, "the README says how many notebooks there are"
    for doc, phrase in said:
        assert _counted(re.findall(r"\w+", phrase)[1 if phrase.startswith("all") else 0]) == len(NOTEBOOKS), \
            (doc, phrase, NOTEBOOKS)
    table = (REPO / "docs" / "metrics.md").read_text().split("## Notebooks", 1)[1]
    assert [name for name in NOTEBOOKS if f"| `{name}` |" not in table] == []


def test_every_jupyter_command_in_the_docs_is_installed():
    shown = {m.group(1) for doc in DOCS for m in re.finditer(r"`(?:[\w./]*/)?jupyter (\w[\w-]*)", doc.read_text())}
    bin_dir = Path(sys.executable).parent
    assert [c for c in sorted(shown) if not (bin_dir / f"jupyter-{c}").is_file()] == [], bin_dir
    assert "nbconvert" not in " ".join(doc.read_text() for doc in DOCS)
