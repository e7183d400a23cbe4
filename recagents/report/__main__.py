"""``python -m recagents.report``: run :func:`recagents.report.cli.main`."""

import sys

from recagents.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
