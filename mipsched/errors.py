"""The base of every error caused by bad input (network, hardware, schedule, file).

The CLI turns these into one line on stderr and exit code 2; anything else is a bug."""

import reprlib

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 2, 4, 4
_SHORT.maxstring = _SHORT.maxother = 40


class InputError(ValueError):
    """Bad input; the message names the offending layer, tensor, key or line."""


def show(value: object) -> str:
    """A short repr of a value read from a file, for error messages: bounded in length
    however large (or, with YAML aliases, however deeply shared) the value is."""
    try:
        return _SHORT.repr(value)
    except ValueError:  # an integer with more digits than Python will print
        return "<an integer too long to print>"
