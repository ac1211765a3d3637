"""The SDK's exceptions."""


class WeirError(Exception):
    """A failure the SDK reports (a bad amount, a state error, …). Any
    exception raised by function code fails the call; this one is the
    SDK's own."""


class StateError(WeirError):
    """The host refused a state or timer operation."""


class FunctionError(WeirError):
    """A call failed: what the host receives as ``function-error``."""
