"""``python -m figures [OUT_DIR]``: build every figure, formula-only, into OUT_DIR (default: this package's folder)."""

import sys
from pathlib import Path

from kvcore.errors import KVToolkitError

from . import FIGURES, build_all


def main(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: python -m figures [OUT_DIR]", file=sys.stderr)
        return 2
    out = Path(argv[0]) if argv else Path(__file__).parent
    try:
        written = build_all(out)
    except (KVToolkitError, OSError) as exc:
        print(f"figures: {exc}", file=sys.stderr)
        return 2
    for fid, paths in written.items():
        print(f"{fid:>8}  {FIGURES[fid].title}: {', '.join(p.name for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
