"""Hardware model and presets."""

from mipsched.hw.load import PRESETS, load_hardware
from mipsched.hw.model import Hardware

__all__ = ["PRESETS", "Hardware", "load_hardware"]
