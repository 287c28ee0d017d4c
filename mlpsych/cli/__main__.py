"""`python -m mlpsych.cli ...` works like the `mlpsych` command."""

import sys

from mlpsych.cli import main

sys.exit(main())
