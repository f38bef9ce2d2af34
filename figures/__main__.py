"""``python -m figures OUT_DIR``: build every figure, formula-only, into OUT_DIR.

The package folder ``figures/`` holds the figures ``python -m paper_check`` builds *with* their measured overlays, so
this formula-only build needs a directory of its own.
"""

import sys
from pathlib import Path

from kvcore.errors import KVToolkitError

from .catalogue import FIGURES, build_all


USAGE = "usage: python -m figures OUT_DIR  (figures/ itself is written by python -m paper_check)"


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    out = Path(argv[0])
    if out.resolve() == Path(__file__).resolve().parent:
        print("figures: OUT_DIR must not be figures/ itself: python -m paper_check writes the figures there with "
              "their measured overlays", file=sys.stderr)
        return 2
    try:
        written = build_all(out)
    except (KVToolkitError, OSError) as exc:
        print(f"figures: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("figures: interrupted (every figure is written atomically: none is left half-written)",
              file=sys.stderr)
        return 130
    for fid, paths in written.items():
        print(f"{fid:>8}  {FIGURES[fid].title}: {', '.join(p.name for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
