"""Lower bounds and exact models (CP-SAT / MIP) of the scheduling space."""
