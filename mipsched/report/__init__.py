"""Ways to look at a replayed schedule: Chrome/Perfetto traces, CSV tables, plots."""
