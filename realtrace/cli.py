"""``python -m realtrace COMMAND ...``: the real-trace command lines, each a :class:`kvcore.command.Command` mounted
as it is (the same code path as ``python -m paper_check capture|press``):

* ``capture`` (:mod:`realtrace.capture_cli`, needs the ``[real]`` extra) -- attention traces into a trace set;
* ``report`` (:mod:`realtrace.report_cli`) -- measurements and experiments on a trace set;
* ``press`` (:mod:`realtrace.press.cli`, needs ``[real,kvpress]``) -- kvpress presses against the exact optimum;
* ``study`` (:mod:`realtrace.study_cli`) -- every layer and KV head at several budgets, as parallel tasks;
* ``allocate`` (:mod:`realtrace.allocate_cli`) -- one total budget over the KV heads: uniform, static, coupled.
"""

from __future__ import annotations

import argparse

from kvcore.command import Command, OneLineParser, dispatch

PROG = "python -m realtrace"
EXAMPLES = ("commands:\n"
            "  python -m realtrace capture --out DIR [--tokens N] [--prompt FILE|builtin:NAME] [--layers ...]\n"
            "  python -m realtrace report [TRACESET_DIR] [--budget K ...] [--json FILE]\n"
            "  python -m realtrace press NAME|--all [--ratio R | --budget K] [--decoding --interval N] --traces DIR\n"
            "  python -m realtrace study --traces DIR --out DIR [--budgets K,K,..] [--workers N | --scheduler ADDR]\n"
            "  python -m realtrace allocate [--traces DIR] --total B [--json] [--lukv-curve FILE]")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from .allocate_cli import COMMAND as allocate
    from .capture_cli import COMMAND as capture
    from .press.cli import COMMAND as press
    from .report_cli import COMMAND as report
    from .study_cli import COMMAND as study

    ap.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps the epilog's command lines as they are
    ap.epilog = EXAMPLES
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    capture.mount(sub, "capture", "capture real attention traces (needs the [real] extra)")
    report.mount(sub, "report", "measurements and experiments on a trace set")
    press.mount(sub, "press", "a kvpress press against the exact NM optimum (needs the [real,kvpress] extras)")
    study.mount(sub, "study", "every layer and KV head of trace sets at several budgets, as parallel tasks")
    allocate.mount(sub, "allocate", "one total budget over the KV heads: uniform, static optimum, coupled optimum")


COMMAND = Command(prog=PROG, description="Real attention traces from a real language model, and the measurements on "
                  "them.", add_arguments=add_arguments, run=dispatch)


def main(argv: list[str] | None = None) -> int:
    """``python -m realtrace ARGS`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    return COMMAND.main(argv)
