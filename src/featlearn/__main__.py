"""``python -m featlearn <command> ...``: the command line of :mod:`featlearn.pipeline.cli`."""

import sys

from featlearn.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main())
