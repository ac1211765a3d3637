"""The examples in the SDK's docstrings run."""

import doctest

import weir
import weir.money


def test_docstring_examples():
    for module in (weir, weir.money):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
