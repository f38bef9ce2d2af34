"""Atomic outputs: every file the toolkit writes goes to a temporary name beside its target and is renamed over it.

A rename within one directory is atomic on POSIX file systems, so a reader -- or a run interrupted by Ctrl-C or a
crash -- sees either the previous file or the complete new one, never a truncated or half-written one.  The
temporary name comes from :func:`tempfile.mkstemp` (unique, so concurrent writers of one target do not collide);
mkstemp creates mode 0600, so the finished file gets the mode a plain ``open()`` would give it (0666 minus the
user's umask).  Used for trace files, figures, reports, ledgers, study and fuzz outputs alike.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

# Figure metadata that would make two renderings of the same figure differ (timestamps, the software version).
PNG_METADATA = {"Software": None}
SVG_METADATA = {"Date": None, "Creator": None}


def user_file_mode() -> int:
    """The mode ``open(path, "w")`` would create a file with: ``0o666`` minus the process umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path beside ``path`` to write; on success it gets :func:`user_file_mode` and replaces
    ``path``; on any exception (KeyboardInterrupt included) it is removed and ``path`` is left as it was."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=target.suffix)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, user_file_mode())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    return Path(path)


FIGURE_FORMATS = ("png", "svg")  # what :func:`save_figure` writes, in this order


def save_figure(fig: Any, out_dir: str | os.PathLike, stem: str) -> list[Path]:
    """Write a matplotlib figure as ``stem.png`` and ``stem.svg`` into ``out_dir`` (created if missing), each
    atomically and without timestamps (so the same figure gives the same bytes); returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt, metadata in zip(FIGURE_FORMATS, (PNG_METADATA, SVG_METADATA)):
        final = out / f"{stem}.{fmt}"
        with replacing(final) as tmp:
            fig.savefig(tmp, format=fmt, metadata=metadata)
        paths.append(final)
    return paths


def unwritable(path: str | os.PathLike, want: str) -> str | None:
    """Why ``path`` cannot receive the output it names -- ``want`` is ``"file"`` (written by :func:`replacing`, whose
    temporary file goes beside it, so its directory must exist) or ``"directory"`` (created with its missing parents,
    as :func:`save_figure` does) -- or None if it can.  Permission is :func:`os.access`'s answer for this process: as
    root a read-only directory is writable, so only what would really fail is refused."""
    text = os.fspath(path)
    if not text.strip():
        return "an empty path"
    target = Path(text)
    try:
        if want == "file":
            if target.is_dir():
                return "is a directory; a file is wanted"
            if target.exists() and not target.is_file():
                return "exists and is not a regular file"
            where = target.parent
            if not where.exists():
                return f"its directory does not exist ({where})"
        else:
            if target.exists() and not target.is_dir():
                return "exists and is not a directory"
            where = target.absolute()
            while not where.exists():  # the nearest existing ancestor, where the missing ones would be made
                where = where.parent
        if not where.is_dir():
            return f"{where} is not a directory"
        if not os.access(where, os.W_OK | os.X_OK):
            return f"{where} is not writable"
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    return None
