"""The collection pipeline: from each target's data to stored snapshots.

    config.py      inferwatch.yaml: targets, intervals, store, alerting settings
    collector.py   the scheduler: each target on its own interval, one attempt at a time
    sources.py     where a target's window comes from (the seam): ScrapeSource, the embedded
                   scraper, or PromQLTargetSource, a Prometheus-compatible API
    scrape.py      a fetched page normalized to the inferwatch schema and read into values
    page_plan.py   a page of an unchanged shape read through a traced, compiled plan
    deltas.py      two readings of a target -> increases over the window (counter resets)
    promql.py      the same window read from a PromQL API (increase() semantics)
    snapshot.py    the Snapshot: one target over [start, end), what the store keeps
    recorder.py    snapshots queued and written to the store off the event loop
    derive.py      snapshots -> the derived figures (tokens/s, percentiles, utilization)
    cli.py         `inferwatch collect`: the pipeline and the evaluation loop, without the API
"""
