"""``python -m fedgc.cli COMMAND ...``: the same as ``python -m fedgc`` and the ``fedgc`` command."""

import sys

from fedgc.cli import main

if __name__ == "__main__":
    sys.exit(main())
