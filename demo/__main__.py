"""``python -m demo ...``: the same command line as ``mlm-icl`` (``demo.cli``)."""

import sys

from .cli import main

sys.exit(main())
