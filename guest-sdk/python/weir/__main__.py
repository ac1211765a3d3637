"""``python -m weir build PROJECT -o OUT.wasm``: see :mod:`weir._build`."""

import sys

from ._build import main

sys.exit(main())
