"""Anomaly detection for metrics without fixed thresholds: seasonal baselines (load-aware
throughput ratio), robust per-metric scores, a multivariate outlier detector, hysteresis,
diagnosis of a target's simultaneous anomalies, and the NAB scoring used to evaluate them."""
