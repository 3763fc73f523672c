"""``python -m fedgc COMMAND ...``: the ``fedgc`` command (``fedgc.cli``)."""

import sys

from fedgc.cli import main

if __name__ == "__main__":
    sys.exit(main())
