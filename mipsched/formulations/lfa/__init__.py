"""The LFA of a fixed computing order as a CP-SAT model over candidate segments (FLGs
with a tiling number): the segment table (`segments`), the model (`model`), the search
with no-good cuts for the fit (`search`) and the relaxation bounds over every order
(`relaxation`). Re-exports the names the rest of the package imports from here."""

from mipsched.formulations.lfa.model import GROUPS, SegmentModel
from mipsched.formulations.lfa.search import LfaSolution, solve_lfa
from mipsched.formulations.lfa.segments import (
    BufferRow,
    SegmentCache,
    SegmentTable,
    flg_keys,
    unfused_tally,
)

__all__ = ["GROUPS", "BufferRow", "LfaSolution", "SegmentCache", "SegmentModel",
           "SegmentTable", "flg_keys", "solve_lfa", "unfused_tally"]
