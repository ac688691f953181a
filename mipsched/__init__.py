"""mipsched: DNN accelerator scheduling in SoMa's tensor-centric notation, with exact
CP-SAT formulations, a discrete-event simulator and certified lower bounds."""

__version__ = "0.1.0"
