"""``python -m realtrace capture ...`` (see :mod:`realtrace.capture`) and ``python -m realtrace report DIR``."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
