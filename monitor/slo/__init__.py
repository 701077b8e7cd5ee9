"""Service level objectives: specs (native, OpenSLO v1, Sloth), error-budget math, the
incremental multiwindow multi-burn-rate evaluator, and generated Prometheus rules."""
