"""`python -m harnessc.compiler`: the `harnessc` command line."""

import sys

from .cli import main

sys.exit(main())
