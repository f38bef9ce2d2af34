"""``python -m paper_check``: Ctrl-C at any moment, imports included, exits 130 without a traceback."""

import sys

try:
    from .cli import main

    code = main()
except KeyboardInterrupt:
    print("paper_check: interrupted (outputs left as they were)", file=sys.stderr)
    code = 130
sys.exit(code)
