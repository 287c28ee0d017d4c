"""`python -m mlpsych ...` works like the `mlpsych` command."""

import sys

from mlpsych.cli import main

sys.exit(main())
