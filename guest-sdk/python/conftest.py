"""Make ``import weir`` work when pytest runs from the repository root
without PYTHONPATH (the SDK is a flat layout: guest-sdk/python/weir)."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
