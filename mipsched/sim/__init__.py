"""Discrete-event simulator: replays a schedule, reports figures and stalls, or says
exactly why the schedule is invalid."""

from mipsched.sim.engine import simulate
from mipsched.sim.result import SimResult, SimulationError

__all__ = ["SimResult", "SimulationError", "simulate"]
