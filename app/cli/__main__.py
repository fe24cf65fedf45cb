"""`python -m app.cli ...`, the same as the `sched-sim` console script."""

import sys

from .dispatch import main

sys.exit(main())
