"""``python -m featlearn <command> ...``: the command line of :mod:`featlearn.cli`."""

import sys

from featlearn.cli import main

if __name__ == "__main__":
    sys.exit(main())
