"""`python -m flashjit ARGS`: the `flashjit` command the wheel installs (the bundled tool), run the same way."""
import sys

from ._cli import main

sys.exit(main())
