"""``python -m interp_rand.cli ...``: the ``interp-rand`` command."""

import sys

from interp_rand.cli.main import main

sys.exit(main())
