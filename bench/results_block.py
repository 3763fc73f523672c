"""Writing a bench's table into ``docs/results.md`` between its ``<!-- name:begin -->`` and
``<!-- name:end -->`` markers (appended at the end the first time), leaving the text around it alone."""

from __future__ import annotations

from pathlib import Path


def write_block(path: Path, begin: str, end: str, block: str) -> None:
    """``block`` must start with ``begin`` and end with ``end``."""
    text = path.read_text() if path.is_file() else "# Results\n\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def commit(repo: Path) -> str | None:
    """``repo``'s short commit, with " with uncommitted changes" when ``fedgc/`` or ``bench/`` differ from
    it (tracked files); None outside a git checkout."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip() or None
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "fedgc", "bench"],
                                 cwd=repo, capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head} with uncommitted changes" if head and changed else head
