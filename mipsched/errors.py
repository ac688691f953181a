"""The base of every error caused by bad input (network, hardware, schedule, file).

The CLI turns these into one line on stderr and exit code 2; anything else is a bug."""


class InputError(ValueError):
    """Bad input; the message names the offending layer, tensor, key or line."""
