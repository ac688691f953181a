"""`--method auto`: SoMa's SA for a share of the time budget, then the exact DLSA model
(whole program or sliding windows) on SA's best LFA, hinted with SA's DLSA. The model is
never worse than its hint; the best is kept."""

from __future__ import annotations

import time

from mipsched.evaluate import evaluate
from mipsched.formulations.dlsa import improve_dlsa
from mipsched.heuristics.common import Candidate, MethodResult, SearchOptions
from mipsched.heuristics.soma_sa import soma_sa
from mipsched.schedule.lowering import Lowerer

SA_SHARE = 0.6
"""Share of --time-limit given to SA; the DLSA model gets the rest."""
MODEL_SECONDS = 30.0
"""The DLSA model's time when no --time-limit is given."""


def auto(lowerer: Lowerer, options: SearchOptions) -> MethodResult:
    started = time.perf_counter()
    sa_limit = None if options.time_limit is None else SA_SHARE * options.time_limit
    sa = soma_sa(lowerer, SearchOptions(options.seed, sa_limit, options.objective,
                                        options.workers, options.stop))
    best = sa.best
    if options.time_limit is None:
        model_limit = MODEL_SECONDS
    else:
        model_limit = max(options.time_limit - (time.perf_counter() - started), 0.0)
    models = []
    if model_limit > 0 and not options.stop.is_set():
        result = improve_dlsa(best.program, best.dlsa, model_limit, options.workers,
                              options.seed)
        models = [{"model": "dlsa", "scope": "whole" if result.whole else "window",
                   "status": s.status, "objective": s.objective, "bound": s.bound,
                   "wall_seconds": s.wall_seconds, "workers": s.workers}
                  for s in result.statuses]
        if result.latency_cycles < best.evaluation.latency_cycles:
            best = Candidate(best.lfa, best.program, result.dlsa,
                             evaluate(best.program, result.dlsa))
    stages = {**sa.stages, "cpsat": best}
    return MethodResult(best, stages, sa.evaluations, models)
