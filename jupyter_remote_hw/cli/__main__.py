"""``python -m jupyter_remote_hw.cli``: the command line, as the ``jupyter-remote-hw``
script runs it."""

import sys

from .commands import main

sys.exit(main())
