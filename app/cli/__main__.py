"""`python -m app.cli ...`, the same as the `sched-sim` console script."""

import sys

from .commands import main

sys.exit(main())
