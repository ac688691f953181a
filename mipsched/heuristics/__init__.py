"""Search heuristics and baselines; all share the evaluator."""
