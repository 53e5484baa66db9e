"""python -m commstack: the same as the `commstack` command."""

import sys

from commstack.cli.main import main

sys.exit(main())
