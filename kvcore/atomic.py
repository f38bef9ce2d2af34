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
