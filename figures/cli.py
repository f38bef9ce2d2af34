"""``python -m figures OUT_DIR``: build every figure, formula-only, into OUT_DIR.

The package folder ``figures/`` holds the figures ``python -m paper_check`` builds *with* their measured overlays, so
this formula-only build needs a directory of its own.  Every figure is written atomically (:mod:`kvcore.atomic`):
Ctrl-C leaves none half-written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kvcore.command import Command, output_dir
from kvcore.errors import ParameterError

PACKAGE_DIR = Path(__file__).resolve().parent


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=output_dir, metavar="OUT_DIR", help="directory to write every figure to (PNG + SVG); "
                   "not figures/ itself, which python -m paper_check writes with the measured overlays")


def run(args: argparse.Namespace) -> int:
    from .catalogue import FIGURES, build_all  # matplotlib: imported after the arguments are checked (1 s)

    out = Path(args.out)
    if out.resolve() == PACKAGE_DIR or (out / "catalogue.py").is_file():
        # the second test also covers another checkout's figures/ (an editable install elsewhere)
        raise ParameterError("OUT_DIR must not be figures/ itself: python -m paper_check writes the figures there "
                             "with their measured overlays")
    try:
        written = build_all(out)
    except OSError as exc:
        raise ParameterError(f"OUT_DIR {out}: {exc.strerror or exc}") from None
    for fid, paths in written.items():
        print(f"{fid:>8}  {FIGURES[fid].title}: {', '.join(p.name for p in paths)}")
    return 0


COMMAND = Command(prog="figures", description="Build every figure of the paper, formula-only (no measured overlays), "
                  "into OUT_DIR.", add_arguments=add_arguments, run=run)
