"""Command line: ``python -m realtrace capture ...`` (needs the [real] extra) and ``python -m realtrace report``."""

from __future__ import annotations

import sys

USAGE = ("usage: python -m realtrace capture --out DIR [--tokens N] [--prompt FILE|builtin:NAME] [--layers ...]\n"
         "       python -m realtrace report [TRACESET_DIR] [--budget K ...] [--json FILE]\n"
         "       python -m realtrace press NAME|--all [--ratio R | --budget K] [--decoding --interval N] --traces DIR\n"
         "       python -m realtrace study --traces DIR --out DIR [--budgets K,K,..] [--workers N | --scheduler ADDR]")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE + "\n")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "capture":
        from .capture import main as capture_main

        return capture_main(rest, prog="realtrace capture")
    if cmd == "report":
        from .report import main as report_main

        return report_main(rest, prog="realtrace report")
    if cmd == "press":
        from .press import main as press_main

        return press_main(rest, prog="realtrace press")
    if cmd == "study":
        from .study import main as study_main

        return study_main(rest, prog="realtrace study")
    sys.stderr.write(f"realtrace: unknown command {cmd!r}\n{USAGE}\n")
    return 2
